"""Addresses judged by what they are, in every spelling: the corpus of non-public
targets (loopback, private, link-local, unspecified, multicast, CGNAT, and IPv6
forms carrying one), public ones left alone, and the owner's allow and block lists."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from pfar.addresses import kind, literal, parse_allowed, parse_blocked
from pfar.tools.hosts import HostPolicy, HostRefused

NOT_PUBLIC = {
    # loopback, spelled every way the system's resolver reads it
    "127.0.0.1": "loopback",
    "127.1": "loopback",
    "127.0.1": "loopback",
    "2130706433": "loopback",
    "0x7f000001": "loopback",
    "0x7f.0.0.1": "loopback",
    "0177.0.0.1": "loopback",
    "127.255.255.254": "loopback",
    "::1": "loopback",
    "[::1]": "loopback",
    "::ffff:127.0.0.1": "loopback",
    "[::ffff:127.0.0.1]": "loopback",
    "::ffff:7f00:1": "loopback",
    "::127.0.0.1": "loopback",  # IPv4-compatible
    "64:ff9b::127.0.0.1": "loopback",  # NAT64
    "64:ff9b:1::7f00:1": "loopback",  # local-use NAT64
    "2002:7f00:1::1": "loopback",  # 6to4
    # unspecified: a connection to it reaches this machine
    "0.0.0.0": "unspecified",
    "0": "unspecified",
    "::": "unspecified",
    "::ffff:0.0.0.0": "unspecified",
    # link-local: the cloud's metadata service
    "169.254.169.254": "link-local",
    "2852039166": "link-local",
    "::ffff:169.254.169.254": "link-local",
    "fe80::1": "link-local",
    "fe80::1%eth0": "link-local",
    # private
    "10.0.0.5": "private",
    "012.0.0.5": "private",  # octal 10
    "172.16.0.1": "private",
    "172.31.255.255": "private",
    "192.168.1.1": "private",
    "::ffff:192.168.1.1": "private",
    "64:ff9b::10.0.0.1": "private",
    "2002:c0a8:101::": "private",
    "fd00::1": "private",
    "fc00::1": "private",
    "fec0::1": "private",  # site-local, deprecated
    # multicast
    "224.0.0.1": "multicast",
    "239.255.255.250": "multicast",
    "ff02::1": "multicast",
    # carrier-grade NAT
    "100.64.0.1": "shared (CGNAT)",
    "100.127.255.254": "shared (CGNAT)",
    "::ffff:100.64.0.1": "shared (CGNAT)",
}
PUBLIC = ["93.184.216.34", "8.8.8.8", "1.1.1.1", "100.128.0.1", "2606:4700:4700::1111"]


@pytest.mark.parametrize(("written", "what"), sorted(NOT_PUBLIC.items()))
def test_every_spelling_of_a_non_public_address_is_judged_by_what_it_is(
    written: str, what: str
) -> None:
    ip = literal(written)
    assert ip is not None, written
    assert kind(ip) == what, (written, ip)


@pytest.mark.parametrize("written", PUBLIC)
def test_public_addresses_pass(written: str) -> None:
    ip = literal(written)
    assert ip is not None and kind(ip) is None


def test_teredo_carries_its_client_address() -> None:
    # Teredo's client is stored inverted: this one's is 127.0.0.1
    client = int(ipaddress.IPv4Address("127.0.0.1")) ^ 0xFFFFFFFF
    teredo = ipaddress.IPv6Address((0x20010000 << 96) | client)
    assert kind(teredo) == "loopback"


def test_names_are_not_addresses() -> None:
    assert literal("example.com") is None
    assert literal("127.0.0.1.example.com") is None


def _refusal(policy: HostPolicy, url: str) -> str | None:
    try:
        asyncio.run(policy.target(url))
    except HostRefused as exc:
        return str(exc)
    return None


def test_only_public_addresses_unless_the_owner_allows_them() -> None:
    public_only = HostPolicy()
    for url in ("http://127.1:8080/", "http://[::ffff:127.0.0.1]/", "https://0x7f000001/x"):
        refusal = _refusal(public_only, url)
        assert refusal is not None and "loopback address" in refusal, url
        assert "allowed_private_hosts" in refusal
    meta = _refusal(public_only, "http://169.254.169.254/latest/meta-data/")
    assert meta is not None and "link-local" in meta
    assert _refusal(public_only, "http://localhost:8080/") is not None  # resolved

    on_port = HostPolicy.of([], ["127.0.0.1:8080", "10.0.0.0/8", "printer.lan:631"])
    assert _refusal(on_port, "http://127.0.0.1:8080/") is None
    assert _refusal(on_port, "http://127.1:8080/") is None  # the same address
    assert _refusal(on_port, "http://127.0.0.1:8081/") is not None  # another port
    assert _refusal(on_port, "http://10.9.8.7/") is None
    assert _refusal(on_port, "http://[::ffff:10.9.8.7]/") is None
    assert _refusal(on_port, "http://169.254.169.254/") is not None


def test_blocked_hosts_compare_names_and_addresses() -> None:
    policy = HostPolicy.of(["Evil.example.", "203.0.113.0/24", "::ffff:198.51.100.7"], [])
    for url in (
        "http://evil.example/",
        "http://EVIL.EXAMPLE./",
        "http://www.evil.example/",
        "http://203.0.113.9/",
        "http://[::ffff:203.0.113.9]/",
        "http://3405803785/",  # 203.0.113.9 as one number
        "http://198.51.100.7/",
    ):
        assert policy.name_refusal(url) is not None, url
        refusal = _refusal(policy, url)
        assert refusal is not None and "blocked_hosts" in refusal, url
    assert policy.name_refusal("http://notevil.example/") is None


def test_bad_entries_are_refused_naming_the_entry() -> None:
    for bad in ("10.0.0.1:99999", "http://x/", "a b", "user@host"):
        with pytest.raises(ValueError, match=r"is not|port"):
            parse_allowed(bad)
    with pytest.raises(ValueError, match="is not a host name"):
        parse_blocked("evil.example/path")
    assert parse_allowed("[::1]:8080").port == 8080
    assert parse_allowed("Printer.LAN").name == "printer.lan"
