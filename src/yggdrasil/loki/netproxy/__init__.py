"""Where the toolbox lets the model's traffic go (internal): addresses, hosts, the proxy.

Owns the address policy shared by the web tools and the proxy (``AddressPolicy``: no
loopback, private, link-local or cloud-metadata address unless opted in), the list of
hosts commands may reach (``AllowedHosts``) and the HTTP(S) proxy that is their only way
out (``NetProxy``: CONNECT tunnels and plain HTTP, each host and address checked). The
command's side (its network namespace, the listener handed over) is ``sandbox``'s.
Imports only ``errors`` and the standard library.
"""

from __future__ import annotations

from ._hosts import WEB_PORTS, AllowedHosts, parse_entry
from ._policy import OPT_IN, AddressPolicy, Resolver, embedded_ipv4, local_reason, resolve_host
from ._proxy import HOW_TO_ALLOW, NetProxy, ProxyRefusal, ProxyRules

__all__ = [
    "HOW_TO_ALLOW",
    "OPT_IN",
    "WEB_PORTS",
    "AddressPolicy",
    "AllowedHosts",
    "NetProxy",
    "ProxyRefusal",
    "ProxyRules",
    "Resolver",
    "embedded_ipv4",
    "local_reason",
    "parse_entry",
    "resolve_host",
]
