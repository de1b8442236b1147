"""Which addresses the toolbox connects to for the model: the web tools and the proxy.

The check runs on the IP address a connection is about to be made to (after DNS, on
every hop of a redirect chain), never on the host name, so ``localhost``, ``0x7f.1``,
``2130706433`` or a DNS name pointing at ``10.0.0.5`` are all judged by where they lead.
By default only public internet addresses pass. ``allow_private`` lets through private,
loopback and other local addresses (an intranet, a test server); cloud metadata
endpoints are refused even then, since they hand out credentials.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ToolError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

OPT_IN = "allow_private_hosts=True"

Resolver = Callable[[str, int], list[str]]


def resolve_host(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, in the resolver's order, without duplicates."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:  # gaierror, and whatever else the resolver raises
        raise ToolError(f"cannot resolve host {host!r}: {exc}; check the URL") from exc
    return list(dict.fromkeys(str(info[4][0]) for info in infos))

# (network, what it is) — checked in order; the first match names the refusal.
_LOCAL: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "an unspecified ('this host') address"),
    ("127.0.0.0/8", "a loopback address"),
    ("10.0.0.0/8", "a private address"),
    ("172.16.0.0/12", "a private address"),
    ("192.168.0.0/16", "a private address"),
    ("169.254.0.0/16", "a link-local address"),
    ("100.64.0.0/10", "a carrier-grade NAT (shared) address"),
    ("192.0.0.0/24", "an IETF protocol address"),
    ("198.18.0.0/15", "a benchmarking address"),
    ("224.0.0.0/4", "a multicast address"),
    ("240.0.0.0/4", "a reserved or broadcast address"),
    ("::/128", "an unspecified address"),
    ("::1/128", "a loopback address"),
    ("fc00::/7", "a unique-local (private) address"),
    ("fe80::/10", "a link-local address"),
    ("fec0::/10", "a site-local address"),
    ("ff00::/8", "a multicast address"),
    ("64:ff9b:1::/48", "a local NAT64 address"),
    ("2001::/32", "a Teredo tunnel address"),
)

# Cloud instance metadata services hand out credentials: refused even with the opt-in.
_METADATA: tuple[str, ...] = (
    "169.254.169.0/24",  # AWS, GCP, Azure, OpenStack, DigitalOcean ... (169.254.169.254)
    "169.254.170.0/24",  # AWS ECS task and EKS pod credentials
    "fd00:ec2::/32",  # AWS IMDS over IPv6
    "100.100.100.200/32",  # Alibaba Cloud
    "192.0.0.192/32",  # Oracle Cloud
)


_LOCAL_NETS = tuple((ipaddress.ip_network(net), what) for net, what in _LOCAL)
_METADATA_NETS = tuple(ipaddress.ip_network(net) for net in _METADATA)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_COMPAT = ipaddress.ip_network("::/96")


@dataclass(frozen=True)
class AddressPolicy:
    """Decides, per IP address, whether a web tool may connect to it.

    ``blocked`` adds networks refused in every mode (an operator's own deny list, or a
    test's stand-in for "a private network" while 127.0.0.1 is allowed).
    """

    allow_private: bool = False
    blocked: tuple[IPNetwork, ...] = ()

    def refusal(self, address: str) -> str | None:
        """What makes ``address`` off-limits ('a loopback address'), or None when allowed."""
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
        inner = embedded_ipv4(ip)
        forms = (ip,) if inner is None else (ip, inner)
        if _within(forms, _METADATA_NETS):
            return f"a cloud metadata address (refused even with {OPT_IN})"
        if _within(forms, self.blocked):
            return "in a blocked network"
        return None if self.allow_private else local_reason(ip)


def local_reason(ip: IPAddress) -> str | None:
    """What makes ``ip`` a non-public address, or None for a public internet address."""
    inner = embedded_ipv4(ip)
    if inner is not None:
        why = local_reason(inner)
        return f"an IPv6 form of {inner}, {why}" if why else None
    for net, what in _LOCAL_NETS:
        if ip in net:  # False across IP versions
            return what
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_reserved or ip.is_unspecified:
        return "a reserved address"
    if not ip.is_global:
        return "not a public internet address"
    return None


def _within(forms: tuple[IPAddress, ...], networks: tuple[IPNetwork, ...]) -> bool:
    return any(ip in net for ip in forms for net in networks)


def embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, compatible, 6to4, NAT64)."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or (ip in _COMPAT and int(ip) > 1):  # '::' and '::1' are their own
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None
