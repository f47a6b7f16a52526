"""Which backend a message goes to, and what a virtual host offers as a whole."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from apps.gateway.pipeline.values import BackendView, VirtualHostView


def single_backend(vhost: VirtualHostView) -> tuple[str, BackendView]:
    """The one backend of a host that rewrites no name (`VirtualHostView.composed` is False), to
    which every message passes through unchanged."""
    if vhost.composed or len(vhost.mounts) != 1:
        raise ValueError(f"virtual host {vhost.slug!r} rewrites names; route its messages by name")
    return next(iter(vhost.mounts.items()))


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
