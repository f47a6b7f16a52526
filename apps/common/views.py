"""Liveness and readiness probes for load balancers and orchestrators (docs/observability.md)."""

from django.http import HttpRequest, JsonResponse

from apps.common import lifecycle
from apps.common.health import readiness_check


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


async def readyz(request: HttpRequest) -> JsonResponse:
    """503 when the database or Redis cannot be used (or, with GATEWAY_READYZ_WORKER=fail, when no
    worker heartbeat is recent); each reason is named."""
    readiness = await readiness_check()
    if lifecycle.draining():  # SIGTERM: finishing its requests, taking no new ones
        readiness.problems["shutdown"] = "draining before exit"
    body = {"status": readiness.status, "problems": readiness.problems, "warnings": readiness.warnings}
    return JsonResponse(body, status=503 if readiness.problems else 200)
