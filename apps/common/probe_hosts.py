"""Probes answer under any `Host`.

Kubelets, load balancers and Prometheus reach an instance by its address (`Host: 10.0.4.7:8000`),
which the host check (ALLOWED_HOSTS, the DNS-rebinding protection) is right to refuse for every
other page. A page rebinding a name to the instance learns nothing from the probes: `/healthz` and
`/readyz` say ok or name a failing dependency. `/metrics` names tenants' backends and tools, so it is
exempt only when GATEWAY_METRICS_TOKEN guards it (a rebinding page cannot send the token)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import async_to_sync, iscoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.urls import resolve
from django.utils.decorators import sync_and_async_middleware

Handler = Callable[[HttpRequest], Any]


def _probes() -> dict[str, Handler]:
    """The probes' views as the URLconf routes them (so this module needs to know none of them)."""
    paths = ["/healthz", "/readyz"] + (["/metrics"] if settings.GATEWAY_METRICS_TOKEN else [])
    return {path: resolve(path).func for path in paths}


@sync_and_async_middleware
def probe_hosts_middleware(get_response: Handler) -> Handler:
    """Serves the probes before any middleware asks for the host; must come first in MIDDLEWARE."""
    probes = _probes()

    if iscoroutinefunction(get_response):
        async def async_middleware(request: HttpRequest) -> HttpResponseBase:
            probe = probes.get(request.path_info)
            if probe is None:
                return await get_response(request)  # type: ignore[no-any-return]
            response = probe(request)
            return await response if isinstance(response, Awaitable) else response  # type: ignore[no-any-return]

        return async_middleware

    def middleware(request: HttpRequest) -> HttpResponseBase:
        probe = probes.get(request.path_info)
        if probe is None:
            return get_response(request)  # type: ignore[no-any-return]
        return async_to_sync(probe)(request) if iscoroutinefunction(probe) else probe(request)  # type: ignore[no-any-return]

    return middleware
