"""The hosts commands may reach: ``["pypi.org", "*.github.com", "localhost:8080"]``.

An entry is a host name (``pypi.org``, compared without case and trailing dot), a wildcard
for the names below a domain (``*.github.com`` matches ``api.github.com`` and
``a.b.github.com``, not ``github.com`` itself: list both), or an IP address; without a
port it allows 80 and 443 (HTTP and HTTPS), with ``:PORT`` that port only.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass

_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")
WEB_PORTS = (80, 443)


@dataclass(frozen=True)
class HostEntry:
    name: str  # lower case, no trailing dot; for a wildcard, the domain after "*."
    wildcard: bool
    ports: tuple[int, ...]
    text: str

    def allows(self, host: str, port: int) -> bool:
        if port not in self.ports:
            return False
        if self.wildcard:
            return host.endswith("." + self.name)
        return host == self.name


def normal_host(host: str) -> str:
    """``host`` as compared: lower case, no trailing dot, no IPv6 brackets."""
    return host.strip().lower().rstrip(".").removeprefix("[").removesuffix("]")


def parse_entry(text: str) -> HostEntry:
    """One allowed host; ValueError says what is allowed."""
    raw = text.strip() if isinstance(text, str) else ""
    if not raw or "/" in raw or any(c.isspace() for c in raw):
        raise ValueError(f"allowed host {text!r}: give a host name such as 'pypi.org', "
                         "'*.github.com' or 'pypi.org:8080' (no scheme, path or spaces)")
    host, ports = _split_port(raw, text)
    wildcard = host.startswith("*.")
    name = normal_host(host[2:] if wildcard else host)
    if not _valid_name(name):
        raise ValueError(f"allowed host {text!r} is not a host name or IP address")
    if wildcard and (_is_ip(name) or "." not in name):
        raise ValueError(f"allowed host {text!r}: a wildcard must cover a domain, e.g. "
                         "'*.github.com' (network=True allows every host)")
    return HostEntry(name, wildcard, ports, raw)


def _split_port(raw: str, text: str) -> tuple[str, tuple[int, ...]]:
    if raw.startswith("["):  # [::1]:8080
        host, _, rest = raw[1:].partition("]")
        port = rest.removeprefix(":") if rest.startswith(":") else ""
    elif raw.count(":") == 1:
        host, _, port = raw.partition(":")
    else:
        host, port = raw, ""
    if not port:
        return host, WEB_PORTS
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"allowed host {text!r}: the port must be a number from 1 to 65535")
    return host, (int(port),)


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _valid_name(name: str) -> bool:
    return _is_ip(name) or (0 < len(name) <= 253 and all(_LABEL.match(p) for p in name.split(".")))


class AllowedHosts:
    """The allowed hosts of a toolbox; ``allows(host, port)`` for each connection."""

    def __init__(self, entries: Sequence[str]) -> None:
        if isinstance(entries, str):
            entries = [entries]
        self.entries = tuple(parse_entry(e) for e in entries)

    def allows(self, host: str, port: int) -> bool:
        name = normal_host(host)
        return any(entry.allows(name, port) for entry in self.entries)

    def __str__(self) -> str:
        return ", ".join(e.text for e in self.entries) or "none"

    def __bool__(self) -> bool:
        return bool(self.entries)
