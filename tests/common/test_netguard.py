"""The SSRF guard's rules (apps.common.netguard): which addresses are refused always, which only
when the tenant does not allow private networks, and names judged by what they resolve to."""

from __future__ import annotations

import ipaddress

import pytest

from apps.common.netguard import AddressRefused, address_verdict, host_verdict, resolve_checked, resolve_checked_sync

ALWAYS_REFUSED = [
    ("169.254.169.254", "cloud metadata"),  # AWS, GCP, Azure
    ("fd00:ec2::254", "cloud metadata"),  # AWS over IPv6
    ("100.100.100.200", "cloud metadata"),  # Alibaba
    ("192.0.0.192", "cloud metadata"),  # Oracle
    ("169.254.1.1", "link-local"),
    ("fe80::1", "link-local"),
    ("fe80::1%1", "link-local"),
    ("::ffff:169.254.169.254", "cloud metadata"),  # IPv4-mapped
    ("64:ff9b::a9fe:a9fe", "cloud metadata"),  # NAT64 of 169.254.169.254
    ("2002:a9fe:a9fe::1", "cloud metadata"),  # 6to4 of it
    ("::a9fe:a9fe", "cloud metadata"),  # IPv4-compatible
    ("0.0.0.0", "unspecified"),
    ("::", "unspecified"),
    ("224.0.0.1", "multicast"),
    ("ff02::1", "multicast"),
    ("255.255.255.255", "reserved"),
    ("240.0.0.1", "reserved"),
    ("0.1.2.3", "reserved"),
]
PRIVATE = ["127.0.0.1", "127.8.9.10", "::1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1", "fc00::1",
           "fd12:3456::1", "::ffff:10.0.0.1", "198.18.0.1"]
PUBLIC = ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"]


@pytest.mark.parametrize(("address", "reason"), ALWAYS_REFUSED)
@pytest.mark.parametrize("allow_private", [False, True])
def test_link_local_metadata_and_special_addresses_are_refused_whatever_the_tenant_allows(
    address: str, reason: str, allow_private: bool
) -> None:
    verdict = address_verdict(ipaddress.ip_address(address), allow_private=allow_private)
    assert verdict.always and verdict.reason is not None and reason in verdict.reason


@pytest.mark.parametrize("address", PRIVATE)
def test_private_addresses_need_the_tenants_permission(address: str) -> None:
    refused = address_verdict(ipaddress.ip_address(address), allow_private=False)
    assert refused.reason is not None and "does not allow private networks" in refused.reason
    assert not refused.always
    assert address_verdict(ipaddress.ip_address(address), allow_private=True).reason is None


@pytest.mark.parametrize("address", PUBLIC)
def test_global_addresses_are_allowed(address: str) -> None:
    assert address_verdict(ipaddress.ip_address(address), allow_private=False).reason is None


@pytest.mark.parametrize("host", ["metadata.google.internal", "METADATA.google.internal.", "metadata", "instance-data"])
def test_metadata_service_names_are_refused_without_resolving_them(host: str) -> None:
    verdict = host_verdict(host, allow_private=True)
    assert verdict.always and verdict.reason == "names a cloud metadata service"


def test_bracketed_literals_are_judged_as_addresses() -> None:
    assert host_verdict("[::ffff:169.254.169.254]", allow_private=True).always
    assert host_verdict("api.example.com", allow_private=False).reason is None  # judged when resolved


async def test_a_name_is_judged_by_every_address_it_resolves_to() -> None:
    with pytest.raises(AddressRefused) as refused:
        await resolve_checked("localhost", 80, allow_private=False)
    assert "localhost resolves to 127.0.0.1, which is a loopback address" in str(refused.value)
    assert refused.value.reason.startswith("a loopback address") and not refused.value.always
    assert await resolve_checked("localhost", 80, allow_private=True) == ["127.0.0.1"]
    assert resolve_checked_sync("127.0.0.1", 80, allow_private=True) == ["127.0.0.1"]
    with pytest.raises(AddressRefused, match="169.254.169.254 is a cloud metadata address"):
        resolve_checked_sync("169.254.169.254", 80, allow_private=True)


async def test_one_refused_address_refuses_the_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # A name with a public and a metadata address (this machine has no DNS to serve one: the
    # resolver's answer is what cannot run here).
    import asyncio
    import socket

    async def getaddrinfo(host: str, port: int, **kwargs: object) -> list[tuple]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("8.8.8.8", port)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", port))]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", getaddrinfo)
    with pytest.raises(AddressRefused, match="two.test resolves to 169.254.169.254, which is a cloud metadata"):
        await resolve_checked("two.test", 443, allow_private=True)
