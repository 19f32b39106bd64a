"""Where a URL may go: its host resolved, every address judged, the owner's lists.

A host is compared by what it resolves to, never by how it is spelled: `127.1`,
`2130706433`, `0x7f000001`, `0.0.0.0` and `[::ffff:127.0.0.1]` are all the
kernel's own machine. Loopback, private, link-local (the cloud's metadata service
at 169.254.169.254), unspecified, multicast, shared (CGNAT) and reserved
addresses, and IPv6 forms that carry one of them (IPv4-mapped or -compatible,
NAT64, 6to4, Teredo), are refused unless `[loop.policy] allowed_private_hosts`
lists them. Every address a name resolves to is judged, and the connection is
then made to a judged address (`pinned`), so a name that resolves again to
something else in between is never reached.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..addresses import (
    Address,
    Allowed,
    Network,
    carried,
    kind,
    literal,
    normal_host,
    parse_allowed,
    parse_blocked,
)
from ..errors import ToolFailed

_SETTING = "[loop.policy] allowed_private_hosts"


class HostRefused(ToolFailed):
    """A URL's host may not be reached: the message names the rule."""

    code = "host_refused"


@dataclass(frozen=True, slots=True)
class Target:
    """A URL's host, checked: the addresses to connect to (each one judged)."""

    url: str
    host: str
    port: int
    addresses: tuple[Address, ...]


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """The owner's rules for where a URL may go (`[loop.policy]`)."""

    blocked_names: frozenset[str] = frozenset()
    blocked_networks: tuple[Network, ...] = ()
    allowed: tuple[Allowed, ...] = ()

    @classmethod
    def of(cls, blocked: list[str], allowed_private: list[str]) -> HostPolicy:
        names: set[str] = set()
        networks: list[Network] = []
        for entry in blocked:
            parsed = parse_blocked(entry)
            if isinstance(parsed, str):
                names.add(parsed)
            else:
                networks.append(parsed)
        return cls(frozenset(names), tuple(networks), tuple(map(parse_allowed, allowed_private)))

    def name_refusal(self, url: str) -> str | None:
        """Why the URL's host name itself is blocked, or None (no lookup made)."""
        host = normal_host(urlsplit(url).hostname or "")
        if not host:
            return None
        for name in self.blocked_names:
            if host == name or host.endswith("." + name):
                return (
                    f"Blocked by security policy: the host {host} is blocked "
                    f"({name!r} in [loop.policy] blocked_hosts)"
                )
        written = literal(host)
        return self.address_refusal(host, _port(url), written) if written else None

    def address_refusal(self, host: str, port: int, ip: Address) -> str | None:
        """Why `host` may not be reached at `ip`, or None."""
        for net in self.blocked_networks:
            if any(a in net for a in carried(ip)):
                return (
                    f"Blocked by security policy: the host {host} is {ip}, in {net} "
                    "([loop.policy] blocked_hosts)"
                )
        what = kind(ip)
        if what is None or any(a.covers(host, port, ip) for a in self.allowed):
            return None
        shown = host if host == str(ip) else f"{host} ({ip})"
        return (
            f"Blocked by security policy: {shown} is a {what} address; only public "
            f"addresses are fetched unless {_SETTING} lists it"
        )

    async def target(self, url: str) -> Target:
        """The URL's host resolved and judged (every address it has): where to connect.
        HostRefused names the rule; ToolFailed says the host cannot be resolved."""
        refused = self.name_refusal(url)
        if refused:
            raise HostRefused(refused)
        host = normal_host(urlsplit(url).hostname or "")
        port = _port(url)
        addresses = await resolve(host, port)
        for ip in addresses:
            refused = self.address_refusal(host, port, ip)
            if refused:
                raise HostRefused(refused)
        return Target(url, host, port, tuple(addresses))


# the default where no runner gave the owner's rules: public addresses only
PUBLIC_ONLY = HostPolicy()


async def resolve(host: str, port: int) -> list[Address]:
    """Every address `host` resolves to, looked up off the event loop. The system's
    resolver reads `127.1` and `2130706433` as the addresses they are, as a
    connection to them would."""
    written = literal(host)
    if written is not None:
        return [written]
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
    except (socket.gaierror, UnicodeError) as exc:
        raise ToolFailed(f"cannot resolve the host {host}: {exc}") from None
    found: list[Address] = []
    for *_, sockaddr in infos:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if ip not in found:
            found.append(ip)
    if not found:
        raise ToolFailed(f"cannot resolve the host {host}: no address")
    return found


async def send(
    client: Any, method: str, target: Target, headers: dict[str, str], **kwargs: Any
) -> Any:
    """`client.send` (an httpx.AsyncClient) of a request for `target.url`, made to its
    judged addresses in turn until one answers (a dual-stack host whose first address
    has no route); the last connection error if none does. `kwargs` go to
    `build_request`, but `stream`, which goes to `send`."""
    import httpx  # imported on first use: it costs a restart tens of milliseconds

    stream = bool(kwargs.pop("stream", False))
    failed: httpx.ConnectError | None = None
    for address in target.addresses:
        url, host_header, extensions = pinned(target, address)
        request = client.build_request(
            method, url, headers={**headers, **host_header}, extensions=extensions, **kwargs
        )
        try:
            return await client.send(request, stream=stream)
        except httpx.ConnectError as exc:
            failed = exc
    assert failed is not None  # a Target has at least one address
    raise failed


def pinned(target: Target, address: Address) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The request for `target.url` sent to `address`, one it resolved to: the URL with
    the address for its host, the Host header, and the name TLS checks the
    certificate against (httpx's `sni_hostname`)."""
    parts = urlsplit(target.url)
    ip = str(address)
    netloc = f"[{ip}]" if ":" in ip else ip
    if parts.port is not None:
        netloc += f":{parts.port}"
    url = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    host_header = target.host if parts.port is None else f"{target.host}:{parts.port}"
    if ":" in target.host:  # an IPv6 literal keeps its brackets in the Host header
        host_header = f"[{target.host}]" + ("" if parts.port is None else f":{parts.port}")
    return url, {"Host": host_header}, {"sni_hostname": target.host}


def _port(url: str) -> int:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return port if port is not None else (443 if parts.scheme == "https" else 80)
