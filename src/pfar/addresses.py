"""Addresses judged: which are not public, in every spelling, and the owner's lists.

`127.1`, `2130706433`, `0x7f000001`, `0.0.0.0` and `::ffff:127.0.0.1` are all the
machine itself: an address is judged as the system reads it, and an IPv6 address
that carries an IPv4 one (mapped, compatible, NAT64, 6to4, Teredo) by both.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT (RFC 6598)
# a host name's letters (in its IDNA form): labels of letters, digits, - and _
_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*")
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


def normal_host(host: str) -> str:
    """A host name as compared: lower case, no trailing dot, IDNA (punycode) form."""
    host = host.strip().lower().rstrip(".")
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def carried(ip: Address) -> list[Address]:
    """`ip`, and the IPv4 address an IPv6 form of it carries (mapped, compatible,
    NAT64, 6to4, Teredo's client), which is where a packet to it may end up."""
    found: list[Address] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        packed = int(ip)
        if ip.ipv4_mapped is not None:
            found.append(ip.ipv4_mapped)
        elif packed >> 32 == 0 and packed > 1:  # ::a.b.c.d, not :: or ::1
            found.append(ipaddress.IPv4Address(packed & 0xFFFFFFFF))
        if any(ip in net for net in _NAT64):
            found.append(ipaddress.IPv4Address(packed & 0xFFFFFFFF))
        if ip.sixtofour is not None:
            found.append(ip.sixtofour)
        if ip.teredo is not None:
            found.append(ip.teredo[1])
    return found


def kind(ip: Address) -> str | None:
    """What makes `ip` (or an address it carries) other than a public one, or None."""
    inner = carried(ip)
    for each in [*inner[1:], ip]:  # what it carries says the most: judged first
        if each.is_unspecified:
            return "unspecified"
        if each.is_loopback:
            return "loopback"
        if each.is_link_local:
            return "link-local"
        if each.is_multicast:
            return "multicast"
        if isinstance(each, ipaddress.IPv4Address) and each in _SHARED:
            return "shared (CGNAT)"
        if isinstance(each, ipaddress.IPv6Address) and each.is_site_local:
            return "private"
        if each.is_private:
            return "reserved" if each.is_reserved else "private"
        if each.is_reserved or not each.is_global:
            return "reserved"
    return None


@dataclass(frozen=True, slots=True)
class Allowed:
    """One entry of allowed_private_hosts: addresses (a network) or a host name as
    the URL spells it, on one port or any."""

    network: Network | None
    name: str | None
    port: int | None

    def covers(self, host: str, port: int, ip: Address) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.name is not None:
            return normal_host(host) == self.name
        return self.network is not None and any(a in self.network for a in carried(ip))


def parse_allowed(entry: str) -> Allowed:
    """`10.0.0.5`, `10.0.0.0/8`, `::1`, `127.0.0.1:8080`, `[::1]:8080`, `printer.lan`
    or `printer.lan:631`; ValueError saying what is wrong with `entry`."""
    text = entry.strip()
    try:
        return Allowed(_unmapped(ipaddress.ip_network(text, strict=False)), None, None)
    except ValueError:
        pass
    parts = urlsplit(f"//{text}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{entry!r} has a port that is not a number from 0 to 65535") from None
    host = parts.hostname
    if not host or parts.path or parts.username or parts.query:
        raise ValueError(
            f"{entry!r} is not an address, a network (10.0.0.0/8), a host name, "
            "or one of them with a :port"
        )
    try:
        return Allowed(_unmapped(ipaddress.ip_network(host)), None, port)
    except ValueError:
        pass
    name = normal_host(host)
    if not _NAME.fullmatch(name):
        raise ValueError(f"{entry!r}: {host!r} is not a host name")
    return Allowed(None, name, port)


def parse_blocked(entry: str) -> str | Network:
    """A blocked_hosts entry: an address or network (compared with every address the
    host resolves to), else a host name (blocking its subdomains too)."""
    try:
        return _unmapped(ipaddress.ip_network(entry.strip().strip("[]"), strict=False))
    except ValueError:
        name = normal_host(entry)
        if not _NAME.fullmatch(name):
            raise ValueError(f"{entry!r} is not a host name, an address or a network") from None
        return name


def _unmapped(net: Network) -> Network:
    """`::ffff:a.b.c.d` (one address) written in a list means a.b.c.d."""
    if isinstance(net, ipaddress.IPv6Network) and net.prefixlen == 128:
        mapped = net.network_address.ipv4_mapped
        if mapped is not None:
            return ipaddress.ip_network(mapped)
    return net


def literal(host: str) -> Address | None:
    """`host` as an address when it is written as one in any form the system's
    resolver reads (dotted, shortened `127.1`, one number, hex, octal, IPv6)."""
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None
