"""The client's address behind trusted proxies: X-Forwarded-For read only from a peer the configuration trusts
(``access_log.trusted_proxies``), as nginx's real_ip with ``real_ip_recursive on`` and Envoy's trusted hops.

The header is walked right to left, each trusted address skipped: the first one not trusted is the client's. A
peer outside the list, no header, or an entry that is no address leaves the last address trusted so far (the
peer itself when the header cannot be read), so a client can never put its own claim in front of the proxy's."""
from __future__ import annotations

import ipaddress
from collections.abc import Iterable

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks(cidrs: Iterable[str]) -> tuple[Network, ...]:
    """The CIDRs (an address alone is its own /32 or /128); raises ValueError on one that is no network."""
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)


def _trusted(address: str, trusted: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in trusted)


def client_address(peer: str | None, headers: Iterable[tuple[bytes, bytes]], trusted: tuple[Network, ...]) -> str | None:
    """The client's address: the peer's, or what trusted proxies forwarded (every X-Forwarded-For, in order)."""
    if not trusted or peer is None or not _trusted(peer, trusted):
        return peer
    hops = [part.strip() for key, value in headers if key == b"x-forwarded-for"
            for part in value.decode("latin-1").split(",")]
    current = peer
    for hop in reversed(hops):
        if not _trusted(current, trusted):
            break
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            break
        current = hop
    return current
