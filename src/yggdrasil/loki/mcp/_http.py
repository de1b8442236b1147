"""``loki mcp --http``: the toolbox over the MCP streamable HTTP transport, one per session.

The SDK's ``StreamableHTTPServerTransport`` speaks the protocol; this module is the
session manager in front of it (the SDK's own serves every session from one server, so
every client would share one toolbox, its jobs and its undo). Each request goes through,
in order:

1. the Host and Origin checks against DNS rebinding (the SDK's ``TransportSecurity``):
   a wrong Host is answered 421, a browser page of another origin 403;
2. the bearer token (``Authorization: Bearer <token>``, compared in constant time): 401;
   (before these, ``_door`` bounds the connections still sending a request's head, per
   client and in all, and how long they may take; refusals are logged, rate-limited);
3. the body limit (``max_message_bytes``): a bigger body is answered 413 with a JSON-RPC
   error and never read whole;
4. the session: a request without ``Mcp-Session-Id`` opens one (an ``initialize``), with a
   toolbox of its own from ``make_toolbox``; the session ends when the client sends
   DELETE, after ``idle_timeout`` seconds without a request, or when the server stops,
   and its toolbox is closed then (running commands and background jobs stopped, undo
   copies and scratch folders removed). An unknown or ended session id is answered 404.
"""

from __future__ import annotations

import contextlib
import hmac
import inspect
import json
import logging
import secrets
import signal
import socket
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from ..tools import Toolbox
from ._door import RefusalLog, Waiting, guarded_protocol, raise_nofile
from ._limits import MAX_MESSAGE_BYTES, too_large
from ._sdk import load_sdk
from ._server import build_server, describe, log_to_stderr

__all__ = ["IDLE_TIMEOUT", "MAX_SESSIONS", "HttpApp", "allowed_hosts", "allowed_origins",
           "http_app", "new_token", "serve_http"]

log = logging.getLogger("yggdrasil.loki.mcp")

IDLE_TIMEOUT = 600.0  # seconds without a request before a session and its toolbox end
MAX_SESSIONS = 32  # open sessions (each a toolbox) before a new one is answered 503
SESSION_HEADER = "mcp-session-id"
_HEAD = 1 << 12  # bytes of a refused body kept to find its request id
_SIGNALS = (signal.SIGINT, signal.SIGTERM)

Scope = MutableMapping[str, Any]  # the ASGI types, as starlette spells them
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def new_token() -> str:
    """A fresh bearer token: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1", "[::1]") or host.startswith("127.")


def allowed_hosts(bind: str, names: Iterable[str] = ()) -> list[str]:
    """The Host header values accepted: the bind address (unless a wildcard), the loopback
    names when bound to loopback or a wildcard, and ``names``, each with or without a port."""
    hosts = [] if bind in ("0.0.0.0", "::", "") else [_bracketed(bind)]
    if loopback(bind) or bind in ("0.0.0.0", "::", ""):
        hosts += ["127.0.0.1", "localhost", "[::1]"]
    hosts += [_bracketed(name) for name in names]
    unique = list(dict.fromkeys(hosts))
    return [form for host in unique for form in (host, f"{host}:*")]


def allowed_origins(hosts: Iterable[str], origins: Iterable[str] = ()) -> list[str]:
    """The Origin header values accepted: a page served by one of the accepted hosts
    (http or https, any port) and ``origins`` as given (e.g. ``https://app.example``)."""
    names = [h for h in hosts if not h.endswith(":*")]
    return [*(f"{scheme}://{name}{port}" for name in names for scheme in ("http", "https")
              for port in ("", ":*")), *origins]


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


@dataclass
class _Session:
    """One MCP session: its transport, the server answering it, and its own toolbox."""

    id: str
    box: Toolbox
    server: Any
    transport: Any

    def close(self) -> None:
        self.box.close()
        self.box.discard_undo()


@dataclass
class _Refusal:
    status: int
    message: str
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)


class HttpApp:
    """An ASGI app serving MCP at ``path``: ``http_app`` makes one (see the module)."""

    def __init__(self, make_toolbox: Callable[[], Toolbox], *, token: str | None,
                 hosts: Sequence[str], origins: Sequence[str], path: str = "/mcp",
                 instructions: str = "", max_message_bytes: int = MAX_MESSAGE_BYTES,
                 idle_timeout: float | None = IDLE_TIMEOUT,
                 max_sessions: int = MAX_SESSIONS) -> None:
        from mcp.server.streamable_http import StreamableHTTPServerTransport
        from mcp.server.transport_security import (
            TransportSecurityMiddleware,
            TransportSecuritySettings,
        )

        self.sdk = load_sdk()
        if "idle_timeout" not in inspect.signature(StreamableHTTPServerTransport).parameters:
            raise ImportError(f"mcp {self.sdk.version} has no idle timeout for HTTP sessions; "
                              "serving MCP over HTTP needs mcp>=1.30 or 2.x")
        if token is not None and len(token) < 16:
            raise ValueError("the bearer token must be at least 16 characters (new_token() "
                             "makes one); pass token=None only behind your own authentication")
        self.make_toolbox, self.token, self.path = make_toolbox, token, path.rstrip("/") or "/"
        self.instructions, self.limit = instructions, max_message_bytes
        self.idle_timeout, self.max_sessions = idle_timeout, max_sessions
        self.security_settings = TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=list(hosts),
            allowed_origins=list(origins))
        self.security = TransportSecurityMiddleware(self.security_settings)
        self.sessions: dict[str, _Session] = {}
        self._opening = 0  # sessions whose toolbox is being made
        self._tasks: anyio.abc.TaskGroup | None = None
        self.refusals = RefusalLog()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """Sessions run in a task group that lives from startup to shutdown; at shutdown
        every session ends and its toolbox is closed."""
        async with anyio.create_task_group() as tasks:
            await receive()  # lifespan.startup
            self._tasks = tasks
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
            self._tasks = None
            tasks.cancel_scope.cancel()
        await send({"type": "lifespan.shutdown.complete"})

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        from starlette.requests import Request

        if scope["path"].rstrip("/") != self.path.rstrip("/"):
            return await _answer(send, _Refusal(404, f"not found: MCP is served at {self.path}"))
        refused = await self.security.validate_request(Request(scope), is_post=scope["method"] == "POST")
        client = (scope.get("client") or ("",))[0]
        if refused is not None:
            self.refusals.refused(refused.status_code, client,
                                  bytes(refused.body).decode(errors="replace"))
            return await refused(scope, receive, send)
        if not self._authorized(scope):
            self.refusals.refused(401, client, "missing or wrong bearer token")
            return await _answer(send, _Refusal(401, "missing or wrong bearer token", [
                (b"www-authenticate", b'Bearer realm="loki mcp"')]))
        body = await _bounded_body(receive, self.limit) if scope["method"] == "POST" else b""
        if isinstance(body, _Refusal):
            return await _answer(send, body)
        await self._route(scope, _replay(body, receive), send)

    def _authorized(self, scope: Scope) -> bool:
        if self.token is None:
            return True
        given = _header(scope, b"authorization")
        return hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode())

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        session_id = _header(scope, SESSION_HEADER.encode())
        if session_id:
            session = self.sessions.get(session_id)
            if session is None:
                return await _answer(send, _Refusal(404, "session not found: it ended "
                                                         "(DELETE or idle); initialize a new one"))
            return await session.transport.handle_request(scope, receive, send)
        if scope["method"] != "POST":
            return await _answer(send, _Refusal(400, f"no {SESSION_HEADER} header: POST an "
                                                     "initialize request to open a session"))
        if len(self.sessions) + self._opening >= self.max_sessions:
            return await _answer(send, _Refusal(503, f"{self.max_sessions} sessions are open; "
                                                     "end one (DELETE) or wait for one to idle out"))
        await self._open(scope, receive, send)

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        from mcp.server.streamable_http import StreamableHTTPServerTransport

        if self._tasks is None:
            raise RuntimeError("serve the MCP app with its ASGI lifespan (uvicorn does)")
        self._opening += 1
        try:
            box = await anyio.to_thread.run_sync(self.make_toolbox)
        except Exception as exc:
            log.error("could not make a toolbox for a new session: %s", exc)
            return await _answer(send, _Refusal(500, f"could not make a toolbox: {exc}"))
        finally:
            self._opening -= 1
        session_id = secrets.token_hex(16)
        transport = StreamableHTTPServerTransport(
            mcp_session_id=session_id, is_json_response_enabled=False,
            event_store=None, security_settings=self.security_settings,
            idle_timeout=self.idle_timeout)
        session = _Session(session_id, box, build_server(
            box, instructions=self.instructions, sdk=self.sdk), transport)
        self.sessions[session.id] = session
        await self._tasks.start(self._run, session)
        status = await _status_of(transport.handle_request, scope, receive, send)
        if status is None or status >= 400:  # no session was established
            await transport.terminate()

    async def _run(self, session: _Session, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Serve one session until it ends, then close its toolbox (whatever ended it)."""
        log.info("session %s opened (%d open)", session.id[:8], len(self.sessions))
        how = "failed"
        try:
            async with session.transport.connect() as (read_stream, write_stream):
                task_status.started()
                idle = session.transport.idle_scope or anyio.CancelScope()
                with idle:
                    await session.server.run(read_stream, write_stream,
                                             session.server.create_initialization_options())
                how = "idle" if idle.cancelled_caught else "ended"
        except anyio.get_cancelled_exc_class():
            how = "stopped with the server"
            raise
        finally:
            self.sessions.pop(session.id, None)
            with anyio.CancelScope(shield=True):
                if not session.transport.is_terminated:
                    await session.transport.terminate()
                await anyio.to_thread.run_sync(session.close)
            log.info("session %s %s: its toolbox is closed", session.id[:8], how)


def http_app(make_toolbox: Callable[[], Toolbox], *, token: str | None,
             hosts: Sequence[str] = allowed_hosts("127.0.0.1"),
             origins: Sequence[str] | None = None, path: str = "/mcp",
             instructions: str = "", max_message_bytes: int = MAX_MESSAGE_BYTES,
             idle_timeout: float | None = IDLE_TIMEOUT,
             max_sessions: int = MAX_SESSIONS) -> HttpApp:
    """An ASGI app serving a toolbox per MCP session over streamable HTTP at ``path``.

    ``make_toolbox`` is called once per session (in a worker thread); the toolbox is
    closed when the session ends. ``token`` is the bearer token every request must carry
    (``new_token()`` makes one; ``None`` turns the check off, for a server behind your
    own authentication). ``hosts``/``origins`` are the accepted Host and Origin headers
    (``allowed_hosts()``/``allowed_origins()``; default: loopback only, pages of the
    accepted hosts). Run it with any ASGI server that runs the lifespan (uvicorn does).
    """
    origins = allowed_origins(hosts) if origins is None else origins
    return HttpApp(make_toolbox, token=token, hosts=hosts, origins=origins, path=path,
                   instructions=instructions, max_message_bytes=max_message_bytes,
                   idle_timeout=idle_timeout, max_sessions=max_sessions)


def serve_http(make_toolbox: Callable[[], Toolbox], host: str = "127.0.0.1", port: int = 8000,
               *, token: str | None, names: Sequence[str] = (), origins: Sequence[str] = (),
               root: str | None = None, path: str = "/mcp",
               max_message_bytes: int = MAX_MESSAGE_BYTES,
               idle_timeout: float | None = IDLE_TIMEOUT, max_sessions: int = MAX_SESSIONS,
               ) -> None:
    """Serve ``http_app(make_toolbox, ...)`` on ``host:port`` with uvicorn until SIGINT or
    SIGTERM; then every session ends and its toolbox is closed.

    ``names`` are the host names clients reach the server by (beyond its address);
    ``origins`` browser origins to accept; ``port=0`` picks a free port (the URL is
    logged on stderr once the socket is bound).
    """
    import uvicorn

    _Uvicorn = _uvicorn_server()
    log_to_stderr()
    hosts = allowed_hosts(host, names)
    app = http_app(make_toolbox, token=token, hosts=hosts,
                   origins=allowed_origins(hosts, origins), path=path,
                   instructions=describe(root), max_message_bytes=max_message_bytes,
                   idle_timeout=idle_timeout, max_sessions=max_sessions)
    sock = _bind(host, port)
    url = f"http://{_bracketed(host)}:{sock.getsockname()[1]}{app.path}"
    log.info("serving MCP over HTTP at %s (mcp %s)%s", url, app.sdk.version,
             "" if token else "; NO TOKEN: anyone who reaches the port drives the tools")
    if host in ("0.0.0.0", "::", ""):
        log.info("bound to every interface: clients are accepted by the names %s only "
                 "(add the one they use with names=/--http-host)",
                 ", ".join(h for h in hosts if not h.endswith(":*")))
    raise_nofile()  # a descriptor per connection: the hard limit, not the soft 1,024
    # the SDK warns once per refused request, unbounded: the app logs them, rate-limited
    logging.getLogger("mcp.server.transport_security").setLevel(logging.ERROR)
    config = uvicorn.Config(app, log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=5, h11_max_incomplete_event_size=1 << 16,
                            http=guarded_protocol(Waiting()))
    try:
        _Uvicorn(config).run(sockets=[sock])
    finally:
        sock.close()
    log.info("stopped")


def _uvicorn_server() -> type:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, but a SIGTERM/SIGINT ends it with exit 0 once every session is
        closed (uvicorn raises the signal again after shutting down, which kills the process
        with it)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            previous = {sig: signal.signal(sig, self._stop) for sig in _SIGNALS}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

        def _stop(self, signum: int, frame: Any) -> None:
            log.info("stopping on %s: every session ends", signal.Signals(signum).name)
            self.handle_exit(signum, frame)
            self._captured_signals.clear()

    return Server


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return ""


async def _bounded_body(receive: Receive, limit: int) -> bytes | _Refusal:
    """The request body, or a 413 refusal as soon as it passes ``limit`` (the rest unread)."""
    body = bytearray()
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        if len(body) + len(chunk) > limit:
            head = bytes(body[:_HEAD]) + chunk[:max(0, _HEAD - len(body))]
            error, _ = too_large(head, len(body) + len(chunk), limit)
            return _Refusal(413, error)
        body += chunk
        if message["type"] != "http.request" or not message.get("more_body"):
            return bytes(body)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the body already read, then what the client sends next."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return replay


async def _answer(send: Send, refusal: _Refusal) -> None:
    """A refusal as a JSON-RPC error body (id null) with its HTTP status."""
    text = refusal.message if refusal.message.startswith("{") else json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": refusal.message}})
    data = text.encode()
    await send({"type": "http.response.start", "status": refusal.status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
        *refusal.headers]})
    await send({"type": "http.response.body", "body": data})


async def _status_of(app: Callable[[Scope, Receive, Send], Awaitable[None]], scope: Scope,
                     receive: Receive, send: Send) -> int | None:
    """Run ``app`` on one request; the HTTP status it answered with."""
    status: int | None = None

    async def watch(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    await app(scope, receive, watch)
    return status
