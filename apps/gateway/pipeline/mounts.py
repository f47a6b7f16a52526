"""Which backend a message goes to, and what a virtual host offers as a whole."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from apps.gateway.pipeline.values import BackendView, VirtualHostView
from apps.gateway.protocol.errors import GatewayError, MethodNotFound


def single_backend(vhost: VirtualHostView) -> tuple[str, BackendView]:
    """The one backend of a single-backend virtual host, where every identifier passes through."""
    if len(vhost.mounts) == 1:
        return next(iter(vhost.mounts.items()))
    if not vhost.mounts:
        raise MethodNotFound(f"Virtual host {vhost.slug!r} has no backends")
    raise GatewayError(
        f"Virtual host {vhost.slug!r} mounts {len(vhost.mounts)} backends; this gateway version routes "
        "single-backend virtual hosts only"
    )


def pick_replica(backend: BackendView, affinity: str) -> str:
    """Rendezvous hashing: the same session always lands on the same replica, and removing one
    replica moves only the sessions that were on it."""
    if len(backend.urls) == 1:
        return backend.urls[0]
    return max(backend.urls, key=lambda url: hashlib.blake2b(f"{affinity}|{url}".encode(), digest_size=8).digest())


def merge_capabilities(capabilities: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The union of what the backends offer; a flag is on when any backend has it on."""
    merged: dict[str, Any] = {}
    for caps in capabilities:
        for name, value in caps.items():
            if isinstance(value, Mapping) and isinstance(merged.get(name), dict):
                for flag, flag_value in value.items():
                    merged[name][flag] = merged[name].get(flag) or flag_value
            elif isinstance(value, Mapping):
                merged[name] = dict(value)
            elif name not in merged:
                merged[name] = value
    return merged
