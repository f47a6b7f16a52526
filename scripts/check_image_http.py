"""The HTTP half of scripts/check-image.sh: what a kubelet, a Service and Prometheus would ask of a
gateway started from the image. Standard library only (it runs on the host, not in the image).

    python3 scripts/check_image_http.py wait URL SECONDS
    python3 scripts/check_image_http.py probes BASE_URL METRICS_TOKEN SECONDS

Requests come with the Host a kubelet or Prometheus sends, the pod's address (an address no
GATEWAY_ALLOWED_HOSTS lists), except the console's CSS, which a client asks for by the Service's name."""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request

POD_HOST = "10.1.2.3:8000"
SERVICE_HOST = "mcp-gateway"


def get(url: str, *, host: str, token: str = "") -> tuple[int, bytes]:
    headers = {"Host": host, **({"Authorization": f"Bearer {token}"} if token else {})}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as response:  # noqa: S310
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def wait(url: str, seconds: float) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            status, _ = get(url, host=POD_HOST)
            if status == 200:
                return 0
        except OSError:
            pass
        time.sleep(0.5)
    print(f"check-image: FAIL: {url} did not answer 200 within {seconds:g} s", file=sys.stderr)
    return 1


def probes(base: str, token: str, seconds: float) -> int:
    failures = []
    status, body = get(f"{base}/healthz", host=POD_HOST)
    print(f"check-image: /healthz (Host: {POD_HOST}) -> {status} {body.decode()}", file=sys.stderr)
    if status != 200:
        failures.append("/healthz")
    # Ready, with a fresh worker heartbeat: beat schedules it every 15 s and the worker writes it.
    deadline = time.monotonic() + seconds
    while True:
        status, body = get(f"{base}/readyz", host=POD_HOST)
        answer = json.loads(body)
        if (status == 200 and not answer["warnings"]) or time.monotonic() > deadline:
            break
        time.sleep(2)
    print(f"check-image: /readyz -> {status} {body.decode()}", file=sys.stderr)
    if status != 200 or answer["warnings"]:
        failures.append("/readyz (ready, no warnings)")
    status, _ = get(f"{base}/metrics", host=POD_HOST)
    print(f"check-image: /metrics without the token -> {status}", file=sys.stderr)
    if status != 401:
        failures.append("/metrics without the token is not 401")
    status, body = get(f"{base}/metrics", host=POD_HOST, token=token)
    heartbeat = [line for line in body.decode().splitlines() if line.startswith("mcp_gateway_worker_heartbeat_age")]
    print(f"check-image: /metrics with the token -> {status}, {len(body)} bytes; {heartbeat}", file=sys.stderr)
    if status != 200 or b"mcp_gateway_" not in body:
        failures.append("/metrics with the token")
    status, body = get(f"{base}/static/console.css", host=SERVICE_HOST)
    print(f"check-image: /static/console.css (Host: {SERVICE_HOST}) -> {status}, {len(body)} bytes", file=sys.stderr)
    if status != 200 or not body:
        failures.append("/static/console.css")
    if failures:
        print(f"check-image: FAIL: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "wait":
        sys.exit(wait(args[0], float(args[1])))
    sys.exit(probes(args[0], args[1], float(args[2])))
