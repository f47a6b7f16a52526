"""The policy path's cost (issue 5 §9): the same stateless `tools/call` through a virtual host with
no policy and through one with the full path — a JWT access token verified, an access policy with a
CEL condition over the arguments, a rate limit checked atomically in Redis, hashed audit arguments
— interleaved in one run.

    .venv/bin/python -m bench.policy_path [--calls N] [--output FILE]

Paths (all to the demo MCP server's `add`, C=1): direct (no gateway); `plain` with an API key and no
policy; `guarded` with an API key; `guarded + JWT` with an ES256 access token instead of the key."""

from __future__ import annotations

import asyncio
import datetime
import os
import platform
import sys
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")
django.setup()

import jwt  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402

from apps.catalog.models import VirtualHost  # noqa: E402
from apps.configuration.services import config_apply  # noqa: E402
from apps.gateway.pipeline.policy import RuleSpec  # noqa: E402
from apps.policies.services import access_policy_set, rate_limit_set  # noqa: E402
from apps.tenants.models import Tenant  # noqa: E402
from apps.tenants.services import token_issuer_set  # noqa: E402
from bench.proxy_latency import Caller, bench_main, calibrate, measure, percentile  # noqa: E402
from tests.processes import backend_argv, free_port, gateway_argv, running  # noqa: E402

KEY = "bench-policy-key-0123456789abcdef"
ISSUER = "https://login.bench.test/"
AUDIENCE = "https://gateway.bench.test/"
SIGNING_KEY = ec.generate_private_key(ec.SECP256R1())


def configure(demo_url: str) -> str:
    config_apply(document=f"""
tenants:
  - slug: bench-policy
    name: Policy benchmark
    teams: [platform]
    keys:
      - {{name: agent, team: platform, secret: "{KEY}"}}
backends:
  - {{tenant: bench-policy, name: demo, kind: mcp, transport: streamable-http, urls: ["{demo_url}"]}}
virtual_hosts:
  - {{tenant: bench-policy, slug: plain, backends: {{demo: demo}}}}
  - {{tenant: bench-policy, slug: guarded, backends: {{demo: demo}}}}
""", prune=False)
    tenant = Tenant.objects.get(slug="bench-policy")
    Tenant.objects.filter(pk=tenant.pk).update(audit_arguments="hash")
    access_policy_set(virtual_host=VirtualHost.objects.get(tenant=tenant, slug="guarded"), default="deny", rules=[
        RuleSpec("small-sums", "team", "platform", "allow", ["add"], "arguments.a < 1000000 && arguments.b >= 0"),
        RuleSpec("no-echo", "tenant", "bench-policy", "deny", ["echo"]),
    ])
    rate_limit_set(tenant=tenant, scope="key", name="agent", limit=1_000_000, window_seconds=60)
    rate_limit_set(tenant=tenant, scope="team", name="platform", limit=1_000_000, window_seconds=60)
    pem = SIGNING_KEY.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    token_issuer_set(tenant=tenant, issuer=ISSUER, audience=AUDIENCE, public_key=pem.decode(), algorithms=["ES256"])
    now = int(time.time())
    return jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "bench", "team": "platform", "iat": now,
                       "exp": now + 86400}, SIGNING_KEY, algorithm="ES256", headers={"kid": "k"})


def run(calls: int) -> str:
    demo_port, gateway_port = free_port(), free_port()
    demo_url = f"http://127.0.0.1:{demo_port}/mcp"
    token = configure(demo_url)
    env = {"GATEWAY_INSTANCE_ID": "bench", "GATEWAY_LOG_LEVEL": "WARNING", "GATEWAY_DEBUG": "0"}
    before = calibrate()
    params = {"name": "add", "arguments": {"a": 1, "b": 2}}
    with running(backend_argv("scripts.demo_server", demo_port), demo_port, log_name="bench-policy-demo"), \
         running([*gateway_argv(gateway_port), "-v", "0"], gateway_port, env=env, log_name="bench-policy-gw") as gw:
        via = f"http://127.0.0.1:{gateway_port}/mcp/bench-policy"
        callers = {
            "direct": Caller(demo_url, "modern", "tools/call", params, False),
            "plain (no policy)": Caller(f"{via}/plain", "modern", "tools/call", params, True, key=KEY),
            "guarded (API key)": Caller(f"{via}/guarded", "modern", "tools/call", params, True, key=KEY),
            "guarded (JWT ES256)": Caller(f"{via}/guarded", "modern", "tools/call", params, True, key=token),
        }
        measured = asyncio.run(measure(callers, 1, calls, gw.pid, max(calls // 20, 1)))
    after = calibrate()
    plain = percentile(measured["plain (no policy)"][0], 50)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"### Policy path — {now}",
        "",
        f"Command: `python -m bench.policy_path --calls {calls}`. Machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}. Stateless `tools/call add`, C=1, interleaved in rounds of 20. "
        f"Calibration loop: {before:.3f} s before, {after:.3f} s after.",
        "",
        "| path | p50 | p99 | gateway CPU/call | p50 vs no policy |",
        "|---|---|---|---|---|",
    ]
    for path, (latencies, _, cpu) in measured.items():
        p50 = percentile(latencies, 50)
        cpu_text = "—" if path == "direct" else f"{cpu:.2f} ms"
        delta = "" if path == "direct" else f"{p50 - plain:+.2f} ms"
        lines.append(f"| {path} | {p50:.2f} ms | {percentile(latencies, 99):.2f} ms | {cpu_text} | {delta} |")
        print(lines[-1], flush=True)
    return "\n".join(lines) + "\n"


def main() -> None:
    bench_main(__doc__ or "", run)


if __name__ == "__main__":
    sys.exit(main())
