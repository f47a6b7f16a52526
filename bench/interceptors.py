"""What interceptors cost a proxied call (docs/interceptors.md): the same stateless `tools/call echo`
of a text that carries nothing any interceptor acts on (the common case) through hosts that differ
only in their interceptors, interleaved in one run. The demo server's `echo` answers its text twice
(a text block and `structuredContent`), so a 1,000-byte text makes a result of about 2 KiB:

    .venv/bin/python -m bench.interceptors [--calls N] [--text-bytes N] [--output FILE]

Hosts: `none` (no interceptor); `built-ins on results` (secrets, personal data, field rules with a
deny pattern, a size cap and injection markers, on the result only); `built-ins both ways` (the same
five on the request and the result); `local webhook` (one webhook on the result, a service on
loopback that answers pass). Then, in this process, each built-in's `inspect` alone on the same
result (µs per call), so the added time can be read part by part."""

from __future__ import annotations

import asyncio
import datetime
import os
import platform
import random
import sys
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")
django.setup()

from apps.catalog.credentials import tenant_secret_set  # noqa: E402
from apps.catalog.models import VirtualHost  # noqa: E402
from apps.configuration.services import config_apply  # noqa: E402
from apps.kernel.interceptors import InterceptorSpec, interceptor_spec, interceptors_compile  # noqa: E402
from apps.kernel.interceptors.base import Payload, Subject  # noqa: E402
from apps.policies.services import interceptors_set  # noqa: E402
from apps.tenants.models import Tenant  # noqa: E402
from bench.proxy_latency import Caller, bench_main, calibrate, measure, percentile  # noqa: E402
from tests.backends.webhook_service import KEY as HOOK_KEY  # noqa: E402
from tests.processes import backend_argv, free_port, gateway_argv, running  # noqa: E402

KEY = "bench-interceptors-key-0123456789abcdef"
#: Every built-in, on every phase it runs on (size and injection: results only).
BUILTINS = [spec for spec in (interceptor_spec(fields) for fields in (
    {"name": "secrets", "kind": "secrets"},
    {"name": "personal", "kind": "personal_data"},
    {"name": "fields", "kind": "fields", "settings": {"rules": [{"path": "$..password", "action": "mask"}],
                                                     "deny": [r"BEGIN CERTIFICATE"]}},
    {"name": "size", "kind": "size", "settings": {"max_bytes": 100_000}},
    {"name": "injection", "kind": "injection"},
)) if spec is not None]
HOSTS = ("none", "results", "both", "webhook")


def text_of(size: int) -> str:
    """`size` characters of what a tool returns: prose, a few records with ids, dates, amounts and
    versions — and nothing any interceptor acts on."""
    rng = random.Random(7)
    words = ("the order was shipped to the customer after the payment cleared and the warehouse "
             "confirmed stock for every item in the basket including the spare parts").split()
    lines = [" ".join(rng.choice(words) for _ in range(60)) + "."]
    for n in range(size // 100):
        lines.append(f"order {100000 + n}: {rng.randint(1, 9)} items, EUR {rng.randint(10, 999)}.{rng.randint(10, 99)}, "
                     f"shipped 2026-11-{n + 10:02d}, tracking {rng.getrandbits(40):x}, client v{n}.{n + 2}.1")
    return "\n".join(lines)[:size]


def configure(demo_url: str, hook_url: str) -> None:
    backends = "\n".join(
        f"  - {{tenant: bench-icpt, name: demo-{h}, kind: mcp, transport: streamable-http, urls: [\"{demo_url}\"]}}"
        for h in HOSTS)
    hosts = "\n".join(f"  - {{tenant: bench-icpt, slug: {h}, backends: {{demo: demo-{h}}}}}" for h in HOSTS)
    config_apply(document=f"""
tenants:
  - slug: bench-icpt
    name: Interceptors benchmark
    keys:
      - {{name: agent, secret: "{KEY}"}}
backends:
{backends}
virtual_hosts:
{hosts}
""", prune=False)
    tenant = Tenant.objects.get(slug="bench-icpt")
    tenant_secret_set(tenant=tenant, name="hook-key", value=HOOK_KEY)
    chains = {
        "none": [],
        "results": [InterceptorSpec(s.name, s.kind, phases=("result",), settings=s.settings) for s in BUILTINS],
        "both": BUILTINS,
        "webhook": [InterceptorSpec("hook", "webhook", phases=("result",),
                                    settings={"url": f"{hook_url}/pass", "secret": "hook-key"})],
    }
    for slug, chain in chains.items():
        interceptors_set(virtual_host=VirtualHost.objects.get(tenant=tenant, slug=slug), interceptors=chain)


def inspect_cost(text: str, calls: int) -> dict[str, float]:
    """µs per `inspect` of each built-in on the call's result, as the gateway holds it (JSON text)."""
    import orjson

    response = orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": text}], "structuredContent": {"result": text}, "isError": False}}).decode()
    chain = interceptors_compile(BUILTINS, keys={})
    assert chain is not None
    found: dict[str, float] = {}
    for interceptor in chain.chain:
        assert interceptor.inspector is not None
        subject = Subject("result", "tools/call", "echo", Payload(text=response))
        assert interceptor.inspector.inspect(subject).action == "pass", interceptor.name
        started = time.perf_counter()
        for _ in range(calls):
            interceptor.inspector.inspect(Subject("result", "tools/call", "echo", Payload(text=response)))
        found[interceptor.name] = (time.perf_counter() - started) / calls * 1e6
    return found


def run(calls: int, text_bytes: int) -> str:
    demo_port, hook_port, gateway_port = free_port(), free_port(), free_port()
    demo_url = f"http://127.0.0.1:{demo_port}/mcp"
    configure(demo_url, f"http://127.0.0.1:{hook_port}")
    text = text_of(text_bytes)
    env = {"GATEWAY_INSTANCE_ID": "bench", "GATEWAY_LOG_LEVEL": "WARNING", "GATEWAY_DEBUG": "0"}
    before = calibrate()
    params = {"name": "echo", "arguments": {"text": text}}
    with running(backend_argv("scripts.demo_server", demo_port), demo_port, log_name="bench-icpt-demo"), \
         running(backend_argv("tests.backends.webhook_service", hook_port), hook_port, log_name="bench-icpt-hook"), \
         running([*gateway_argv(gateway_port), "-v", "0"], gateway_port, env=env, log_name="bench-icpt-gw") as gw:
        base = f"http://127.0.0.1:{gateway_port}/mcp/bench-icpt"
        callers = {
            "none": Caller(f"{base}/none", "modern", "tools/call", params, True, key=KEY),
            "built-ins on results": Caller(f"{base}/results", "modern", "tools/call", params, True, key=KEY),
            "built-ins both ways": Caller(f"{base}/both", "modern", "tools/call", params, True, key=KEY),
            "local webhook (result)": Caller(f"{base}/webhook", "modern", "tools/call", params, True, key=KEY),
        }
        measured = asyncio.run(measure(callers, 1, calls, gw.pid, max(calls // 20, 1), rotate=True))
    after = calibrate()
    none = percentile(measured["none"][0], 50)
    none_cpu = measured["none"][2]
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"### Interceptors — {now}",
        "",
        f"Command: `python -m bench.interceptors --calls {calls}`. Machine: {platform.machine()}, {os.cpu_count()} "
        f"cores, Python {platform.python_version()}. Stateless `tools/call echo` of a {len(text)}-byte text "
        f"(arguments of {len(text) + 40} bytes, a result of {result_bytes(text):,} bytes), C=1, interleaved in rounds (each starting with the next host). "
        f"Calibration loop: {before:.3f} s before, {after:.3f} s after.",
        "",
        "| host | p50 | p99 | gateway CPU/call | p50 vs none | CPU vs none |",
        "|---|---|---|---|---|---|",
    ]
    for path, (latencies, _, cpu) in measured.items():
        p50 = percentile(latencies, 50)
        lines.append(f"| {path} | {p50:.2f} ms | {percentile(latencies, 99):.2f} ms | {cpu:.2f} ms | "
                     f"{p50 - none:+.2f} ms | {cpu - none_cpu:+.2f} ms |")
        print(lines[-1], flush=True)
    lines += ["", "| built-in, alone on that result (in process) | µs per inspect |", "|---|---|"]
    for name, micros in inspect_cost(text, 2000).items():
        lines.append(f"| {name} | {micros:.1f} |")
        print(lines[-1], flush=True)
    return "\n".join(lines) + "\n"


def result_bytes(text: str) -> int:
    import orjson

    return len(orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": text}], "structuredContent": {"result": text}, "isError": False}}))


def main() -> None:
    bench_main(__doc__ or "", run, options={"--text-bytes": {"type": int, "default": 1000}})


if __name__ == "__main__":
    sys.exit(main())
