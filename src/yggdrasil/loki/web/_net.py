"""HTTP for the web tools: every connection goes to an address the policy checked.

httpx drives the requests (URLs, headers, content decoding) over :class:`GuardedTransport`,
an httpcore connection pool whose network backend is :class:`GuardedBackend`. httpcore
asks that backend to open every TCP connection; it resolves the host name once, checks
each address with the :class:`AddressPolicy`, and connects to a checked address itself
(an IP literal, so nothing is resolved again). httpcore then starts TLS on that socket
with the URL's host name for SNI and certificate checks, and the Host header comes from
the URL. A DNS answer that changes between the check and the connect (DNS rebinding)
therefore cannot move the connection. Proxies are never used (``trust_env=False``), so
no connection bypasses the backend. Redirects are followed here, hop by hop, each hop
a new connection through the same check.

Content decoding is ours (``_decode``), not httpx's: see there why.

This module imports httpx and httpcore at the top: import it only inside the functions
that use it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpcore
import httpx

from ..errors import ToolError
from ..results import human_size
from ._decode import ACCEPT_ENCODING, content_coding, inflated
from ._policy import OPT_IN, AddressPolicy, Limits, Resolver, resolve_host

USER_AGENT = "yggdrasil-loki (web tools; +https://pypi.org/project/yggdrasil-loki/)"
ALLOWED = (f"the web tools reach public internet addresses over http(s) only "
           f"({OPT_IN} on the toolbox allows private and loopback hosts)")

@dataclass
class Download:
    url: str  # as asked
    final_url: str  # after redirects
    content_type: str  # media type, lower case, no parameters; '' when absent
    charset: str | None
    body: bytes
    size: int  # bytes in the response (len(body) unless the body was skipped)
    size_exact: bool = True  # False: the skipped body was larger than the cap
    redirects: list[str] = field(default_factory=list)  # the hops before final_url
    status: int = 200  # the final response's HTTP status (a 2xx: any other is an error)


class WebRefused(ToolError):
    """A connection the address policy does not allow."""

    category = "address"


class TotalTimeout(ToolError):
    """The whole call (redirects included) took longer than ``Limits.total``."""

    category = "timeout"


class Deadline:
    """The end of the whole call: every socket wait is cut to the time that is left."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def expired(self) -> bool:
        return time.monotonic() >= self.end

    def cap(self, timeout: float | None) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise TotalTimeout(f"took longer than the {self.seconds:g}s total limit")
        return left if timeout is None else min(timeout, left)


class DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream, deadline: Deadline) -> None:
        self._stream = stream
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, self._deadline.cap(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._deadline.cap(timeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        tls = self._stream.start_tls(ssl_context, server_hostname, self._deadline.cap(timeout))
        return DeadlineStream(tls, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class GuardedBackend(httpcore.NetworkBackend):
    """Opens TCP connections only to addresses the policy allows, resolved once."""

    def __init__(self, policy: AddressPolicy, resolve: Resolver, deadline: Deadline) -> None:
        self._policy = policy
        self._resolve = resolve
        self._deadline = deadline
        self._tcp = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        *others, last = self.checked_addresses(host, port)
        for address in others:
            try:
                return self._open(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError:
                continue  # the host's next allowed address may answer
        return self._open(last, port, timeout, local_address, socket_options)

    def _open(self, address: str, port: int, timeout: float | None, local_address: str | None,
              socket_options: Iterable[Any] | None) -> httpcore.NetworkStream:
        stream = self._tcp.connect_tcp(address, port, self._deadline.cap(timeout), local_address,
                                       socket_options)
        return DeadlineStream(stream, self._deadline)

    def checked_addresses(self, host: str, port: int) -> list[str]:
        """The allowed addresses of ``host`` (never empty); WebRefused when there are none."""
        addresses = self._resolve(host, port)
        verdicts = [(address, self._policy.refusal(address)) for address in addresses]
        allowed = [address for address, why in verdicts if why is None]
        if allowed:
            return allowed
        if not verdicts:
            raise ToolError(f"host {host!r} has no address; check the URL")
        address, why = verdicts[0]
        subject = f"{address} is" if address == host.strip("[]") else (
            f"{host} resolves to {address},")
        raise WebRefused(f"{subject} {why}; {ALLOWED}")

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None
                            ) -> httpcore.NetworkStream:
        raise WebRefused("unix sockets are not reachable from the web tools")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class _Body(httpx.SyncByteStream):
    def __init__(self, stream: Iterable[bytes]) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        yield from self._stream

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()


class GuardedTransport(httpx.BaseTransport):
    """An httpx transport over an httpcore pool that connects through GuardedBackend."""

    def __init__(self, backend: GuardedBackend) -> None:
        self._pool = httpcore.ConnectionPool(ssl_context=httpx.create_ssl_context(),
                                             network_backend=backend, retries=0)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, Iterable)
        url = httpcore.URL(scheme=request.url.raw_scheme, host=request.url.raw_host,
                           port=request.url.port, target=request.url.raw_path)
        sent = httpcore.Request(request.method, url, headers=request.headers.raw,
                                content=request.stream, extensions=request.extensions)
        got = self._pool.handle_request(sent)
        assert isinstance(got.stream, Iterable)
        return httpx.Response(got.status, headers=got.headers, stream=_Body(got.stream),
                              extensions=got.extensions)

    def close(self) -> None:
        self._pool.close()


def checked_url(url: str) -> httpx.URL:
    """``url`` parsed, when it is an absolute http(s) URL with a host."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ToolError(f"{url!r} is not a valid URL: {exc}") from exc
    if not parsed.scheme:
        raise ToolError(f"{url!r} has no scheme; give a full URL like https://{url.lstrip('/')}")
    if parsed.scheme not in ("http", "https"):
        raise WebRefused(f"only http:// and https:// URLs can be fetched, not "
                         f"{parsed.scheme}:// (files under the root: read_file)")
    if not parsed.host:
        raise ToolError(f"{url!r} has no host; give a full URL like https://example.org/page")
    return parsed


def download(url: str, *, policy: AddressPolicy, limits: Limits, max_bytes: int, accept: str,
             keep_body: Callable[[str], bool] = lambda media_type: True,
             resolve: Resolver = resolve_host) -> Download:
    """GET ``url``, following up to ``limits.redirects`` redirects, each hop re-checked."""
    deadline = Deadline(limits.total)
    backend = GuardedBackend(policy, resolve, deadline)
    timeout = httpx.Timeout(limits.read, connect=limits.connect)
    hops: list[str] = []
    with httpx.Client(transport=GuardedTransport(backend), trust_env=False, timeout=timeout,
                      headers={"User-Agent": USER_AGENT, "Accept": accept,
                               "Accept-Encoding": ACCEPT_ENCODING}) as client:
        with _translated(url, hops, deadline):
            request = client.build_request("GET", checked_url(url))
        for _ in range(limits.redirects + 1):
            with _translated(str(request.url), hops, deadline):
                checked_url(str(request.url))
                response = client.send(request, stream=True)
                try:
                    if response.next_request is None:
                        return _receive(url, response, hops, max_bytes, keep_body)
                    request = response.next_request
                finally:
                    response.close()
            hops.append(str(response.url))
    raise ToolError(f"{url} redirected more than {limits.redirects} times "
                    f"({' -> '.join(hops)}); give the final URL directly")


@contextmanager
def _translated(url: str, hops: list[str], deadline: Deadline) -> Iterator[None]:
    """httpx/httpcore failures as ToolErrors naming the URL (and the redirect that led to it)."""
    where = f"{url} (redirected from {hops[0]})" if hops else url
    try:
        yield
    except WebRefused as exc:
        raise WebRefused(f"refused {where}: {exc}") from None
    except TotalTimeout as exc:
        raise ToolError(f"{where} {exc}; try a smaller file or another source") from None
    except ToolError:
        raise
    except (httpcore.TimeoutException, httpx.TimeoutException) as exc:
        what = (f"took longer than the {deadline.seconds:g}s total limit" if deadline.expired()
                else f"timed out ({type(exc).__name__})")
        raise ToolError(f"{where} {what}; try again later or another source") from exc
    except (httpcore.ConnectError, httpx.ConnectError) as exc:
        raise ToolError(f"cannot connect to {where}: {exc or type(exc).__name__}") from exc
    except (httpcore.ProtocolError, httpcore.NetworkError, httpx.HTTPError) as exc:
        raise ToolError(f"{where} failed: {type(exc).__name__}: {exc}") from exc


def _receive(url: str, response: httpx.Response, hops: list[str], max_bytes: int,
             keep_body: Callable[[str], bool]) -> Download:
    final = str(response.url)
    if not response.is_success:
        raise ToolError(f"{final} answered HTTP {response.status_code} "
                        f"{response.reason_phrase}; check the URL")
    media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    got = Download(url, final, media_type, response.charset_encoding, b"", 0, redirects=hops,
                   status=response.status_code)
    declared = _declared_size(response)
    coding = content_coding(response.headers, final)
    if not keep_body(media_type):
        got.size, got.size_exact = (declared, True) if declared is not None else _count(
            inflated(response.iter_raw(), coding, max_bytes, final), max_bytes)
        return got
    if declared is not None and declared > max_bytes:
        raise ToolError(f"{final} is {human_size(declared)}, over the "
                        f"{human_size(max_bytes)} download cap; nothing was read")
    raw = response.iter_raw()
    got.body = _read_capped(inflated(raw, coding, max_bytes, final), max_bytes, final)
    got.size = len(got.body)
    return got


def _declared_size(response: httpx.Response) -> int | None:
    value = response.headers.get("content-length", "")
    return int(value) if value.isdigit() and "content-encoding" not in response.headers else None


def _read_capped(chunks: Iterable[bytes], limit: int, url: str) -> bytes:
    kept: list[bytes] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise ToolError(f"{url} sent more than the {human_size(limit)} download cap; "
                            f"aborted after {human_size(size)}")
        kept.append(chunk)
    return b"".join(kept)


def _count(chunks: Iterable[bytes], limit: int) -> tuple[int, bool]:
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > limit:
            return limit, False
    return size, True
