"""The public-address rule of fetches a stranger names (services/outbound.is_public), as a
table: every address that is not a global unicast one is refused, and so is every IPv6 form
that carries an IPv4 address, whatever that IPv4 address is (a NAT64 gateway, a 6to4 relay
or a Teredo server would deliver to it)."""

from __future__ import annotations

import pytest

from identityctl.services.outbound import is_public

REFUSED = {
    # IPv4 that is not global
    "127.0.0.1": "loopback",
    "10.1.2.3": "private",
    "172.16.0.1": "private",
    "192.168.1.1": "private",
    "169.254.169.254": "link-local (cloud metadata)",
    "100.64.0.1": "shared address space (carrier-grade NAT)",
    "0.0.0.0": "unspecified",
    "192.0.2.1": "documentation",
    "224.0.0.1": "multicast",
    "240.0.0.1": "reserved",
    "255.255.255.255": "broadcast",
    # IPv6 that is not global
    "::1": "loopback",
    "::": "unspecified",
    "fe80::1": "link-local",
    "fe80::1%eth0": "link-local with a zone",
    "fc00::1": "unique local",
    "fec0::1": "site-local (deprecated)",
    "ff02::1": "multicast",
    "2001:db8::1": "documentation",
    "100::1": "discard-only",
    # IPv6 forms that embed an IPv4 address: refused even when the IPv4 one is public
    "::ffff:127.0.0.1": "IPv4-mapped loopback",
    "::ffff:8.8.8.8": "IPv4-mapped",
    "::127.0.0.1": "IPv4-compatible loopback",
    "::8.8.8.8": "IPv4-compatible",
    "64:ff9b::7f00:1": "NAT64 of 127.0.0.1",
    "64:ff9b::a9fe:a9fe": "NAT64 of 169.254.169.254",
    "64:ff9b::808:808": "NAT64 of 8.8.8.8",
    "64:ff9b:1::a00:1": "local-use NAT64 of 10.0.0.1",
    "2002:7f00:1::": "6to4 of 127.0.0.1",
    "2002:808:808::1": "6to4 of 8.8.8.8",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2": "Teredo",
}

ALLOWED = {
    "8.8.8.8": "public IPv4",
    "93.184.215.14": "public IPv4",
    "2606:4700:4700::1111": "public IPv6",
    "2a00:1450:4001:80b::200e": "public IPv6",
}


@pytest.mark.parametrize("address", REFUSED, ids=[f"{a} ({why})" for a, why in REFUSED.items()])
def test_an_address_that_is_not_public_is_refused(address: str) -> None:
    assert is_public(address) is False


@pytest.mark.parametrize("address", ALLOWED)
def test_a_global_unicast_address_is_allowed(address: str) -> None:
    assert is_public(address) is True
