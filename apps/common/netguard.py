"""Which network addresses the gateway may send requests to (the SSRF guard).

Backend URLs, OpenAPI server URLs, OAuth token endpoints and JWKS URLs are written by tenants, and
the gateway connects to them from inside the operator's network. These rules decide, per address:

- refused always: link-local addresses (169.254.0.0/16, fe80::/10), the cloud metadata services
  (169.254.169.254, fd00:ec2::254, 100.100.100.200, 192.0.0.192, and names such as
  metadata.google.internal), unspecified, multicast, broadcast and reserved addresses;
- allowed only when the tenant allows private networks: loopback, RFC 1918, unique local
  (fc00::/7), shared address space (100.64.0.0/10) and every other address that is not global;
- allowed: global addresses.

IPv6 addresses that embed an IPv4 address (IPv4-mapped, 6to4, NAT64, IPv4-compatible) are judged
by the IPv4 address they reach. Names are judged by every address they resolve to, at connect time
(`resolve_checked`), so that a name re-pointed after it was saved (DNS rebinding) is refused too.

No Django here: the gateway's own HTTP client uses it on the event loop."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Addresses of cloud instance metadata services (credentials live there).
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",  # AWS, GCP, Azure, OCI, DigitalOcean, OpenStack
    "169.254.170.2",  # AWS ECS task metadata
    "fd00:ec2::254",  # AWS over IPv6
    "100.100.100.200",  # Alibaba Cloud
    "192.0.0.192",  # Oracle Cloud (classic)
))
#: Names of metadata services, refused without resolving them (they may resolve only in the cloud).
METADATA_NAMES = frozenset({
    "metadata", "metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal",
    "metadata.azure.internal", "metadata.tencentyun.com", "metadata.platformequinix.com",
})
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")


class AddressRefused(Exception):
    """The address (or a name's address) is not one the gateway may connect to. The message says
    which address and why, `reason` only why (for messages that must not name the address);
    `always` is true when no tenant setting allows it."""

    def __init__(self, message: str, *, reason: str, always: bool) -> None:
        super().__init__(message)
        self.reason = reason
        self.always = always


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the rules say of one address: `reason` is None when it may be reached."""

    reason: str | None
    always: bool = False


_OK = Verdict(None)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_verdict(address: IPAddress, *, allow_private: bool) -> Verdict:
    """Judge one IP address (see the module docstring for the rules)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            address = ipaddress.IPv6Address(address.compressed.split("%", 1)[0])
        inner = _embedded_ipv4(address)
        if inner is not None:
            return address_verdict(inner, allow_private=allow_private)
    if address in METADATA_ADDRESSES:
        return Verdict("is a cloud metadata address", always=True)
    if address.is_link_local:
        return Verdict("is a link-local address", always=True)
    if address.is_unspecified:
        return Verdict("is the unspecified address", always=True)
    if address.is_multicast:
        return Verdict("is a multicast address", always=True)
    if address.is_loopback:
        return _OK if allow_private else Verdict("is a loopback address and this tenant does not allow private networks")
    if address.is_reserved or address in _THIS_NETWORK:
        return Verdict("is a reserved address", always=True)
    if not address.is_global:
        return _OK if allow_private else Verdict("is a private address and this tenant does not allow private networks")
    return _OK


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def host_verdict(host: str, *, allow_private: bool) -> Verdict:
    """Judge a URL's host without resolving it: literal addresses and metadata service names. A
    name that passes is judged again by its addresses when connecting."""
    literal = _literal(host)
    if literal is not None:
        return address_verdict(literal, allow_private=allow_private)
    if host.lower().rstrip(".") in METADATA_NAMES:
        return Verdict("names a cloud metadata service", always=True)
    return _OK


def _refuse(what: str, verdict: Verdict) -> AddressRefused:
    assert verdict.reason is not None
    return AddressRefused(f"{what} {verdict.reason}", reason=verdict.reason.removeprefix("is "),
                          always=verdict.always)


def _checked(host: str, infos: list[tuple], *, allow_private: bool) -> list[str]:
    addresses: list[str] = []
    for info in infos:
        address = info[4][0]
        verdict = address_verdict(ipaddress.ip_address(address), allow_private=allow_private)
        if verdict.reason is not None:
            # One bad address refuses the name: which one a connection would get is not ours to say.
            raise _refuse(address if address == host else f"{host} resolves to {address}, which", verdict)
        if address not in addresses:
            addresses.append(address)
    return addresses


def _precheck(host: str, allow_private: bool) -> None:
    verdict = host_verdict(host, allow_private=allow_private)
    if verdict.reason is not None:
        raise _refuse(host, verdict)


async def resolve_checked(host: str, port: int, *, allow_private: bool) -> list[str]:
    """The addresses to connect to for `host`, every one of them allowed; raises AddressRefused
    (or OSError when the name does not resolve). Connect to these addresses, not to the name:
    asking DNS again could answer differently."""
    _precheck(host, allow_private)
    infos = await asyncio.get_running_loop().getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    return _checked(host, infos, allow_private=allow_private)


def resolve_checked_sync(host: str, port: int, *, allow_private: bool) -> list[str]:
    """`resolve_checked` for synchronous callers."""
    _precheck(host, allow_private)
    infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    return _checked(host, infos, allow_private=allow_private)
