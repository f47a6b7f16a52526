"""Liveness and readiness probes for load balancers and orchestrators."""

from django.db import connection
from django.http import HttpRequest, JsonResponse

from apps.common.redis import redis_client


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
    problems: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any failure means "not ready"; the reason is reported
        problems["database"] = type(exc).__name__
    try:
        redis_client().ping()
    except Exception as exc:
        problems["redis"] = type(exc).__name__
    status = 503 if problems else 200
    return JsonResponse({"status": "unavailable" if problems else "ok", "problems": problems}, status=status)
