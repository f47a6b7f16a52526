"""Prerequisite chains measured alone: compile pools of `../shared/data/catalog` in-process with the
real compiler (nothing is embedded: chains need the schemas only), derive the chains as indexing
does (`tenant_chains_derive`), and score them with the data set's `score_prereqs.py` — precision
(share of a target's chain that is in its gold closure) and completeness (share of targets whose
chain holds all of it) — for the tuning and validation parts (`split.py`) of `prereqs.jsonl`,
`bench/retrieval/data/prereqs-tuning.jsonl` (tuning only: hand-written over tuning-part services) and
`bench/retrieval/data/prereqs-extra.jsonl` (validation only), each when it exists. The scorer skips
targets whose gold closure is empty; the `empty` column counts those that get a chain anyway.

    DATABASE_URL=postgresql://postgres@127.0.0.1:55432/gateway_chains \\
        .venv/bin/python -m bench.retrieval.chains [--tier cloud3k --tier alibaba] [--output FILE]

A target is scored in the first pool that holds it and every tool of its gold chains. Prints a
markdown table; `--output` appends it."""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")
os.environ.setdefault("GATEWAY_TOOL_INDEX", "0")  # compiled here, never queued for indexing
django.setup()

from apps.catalog.models import Backend, SpecVersion, Tool  # noqa: E402
from apps.catalog.services import backend_create  # noqa: E402
from apps.catalog.specs import spec_upload, spec_version_compile  # noqa: E402
from apps.retrieval.indexing import tenant_chains_derive  # noqa: E402
from apps.tenants.models import Tenant  # noqa: E402
from apps.tenants.services import tenant_create  # noqa: E402
from bench.retrieval.pool import CATALOG, SHARED, _backend_name, _spec_path  # noqa: E402
from bench.retrieval.split import TUNING, VALIDATION, part_of_tool  # noqa: E402

DATA = SHARED / "retrieval-dev"
EXTRA = Path(__file__).resolve().parent / "data" / "prereqs-extra.jsonl"
TUNING_EXTRA = Path(__file__).resolve().parent / "data" / "prereqs-tuning.jsonl"


def pool_compile(tier: str) -> tuple[Tenant, dict[tuple[int, str], str], float]:
    """The tier's services compiled into a tenant of their own (again only when a spec changed):
    the tenant, (backend id, tool name) → tool id of every tool of those services, seconds spent."""
    services = sorted({line.split("::", 1)[0] for line in (CATALOG / "tiers" / f"{tier}.txt").read_text().split()})
    slug = f"chains-{tier}".replace("_", "-")
    tenant = Tenant.objects.filter(slug=slug).first() or tenant_create(slug=slug, name=f"Prerequisite chains: {tier}")
    started = time.perf_counter()
    ids: dict[tuple[int, str], str] = {}
    for service in services:
        name = _backend_name(service)
        backend = Backend.objects.filter(tenant=tenant, name=name).first() or backend_create(
            tenant=tenant, name=name, urls=[], kind=Backend.Kind.OPENAPI, base_url="http://127.0.0.1:9/",
            include_deprecated=True)
        document = _spec_path(service).read_bytes()
        active = backend.active_spec
        if active is None or hashlib.sha256(bytes(active.document)).digest() != hashlib.sha256(document).digest():
            version = spec_version_compile(spec_version_id=spec_upload(backend=backend, document=document).pk)
            if version is None or version.status != SpecVersion.Status.READY:
                raise RuntimeError(f"{service}: compile failed: {version.errors if version else 'gone'}")
        for operation, tool in Tool.objects.filter(backend=backend).values_list("operation_id", "name"):
            ids[(backend.pk, tool)] = f"{service}::{operation}"
    return tenant, ids, time.perf_counter() - started


def _gold(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _score(gold: list[dict], derived: dict[str, list[str]]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        gold_path, derived_path = Path(folder) / "gold.jsonl", Path(folder) / "derived.jsonl"
        gold_path.write_text("".join(json.dumps(g) + "\n" for g in gold))
        derived_path.write_text("".join(json.dumps({"target": g["target"], "closure": derived.get(g["target"], [])})
                                        + "\n" for g in gold))
        done = subprocess.run([sys.executable, str(DATA / "score_prereqs.py"), str(derived_path), "--gold",
                               str(gold_path)], capture_output=True, text=True, check=True)
    fields = dict(part.split("=") for part in done.stdout.split() if "=" in part)
    return {name: float(value) for name, value in fields.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", action="append", help="pools to compile (default: cloud3k, alibaba)")
    parser.add_argument("--output", type=Path, help="append the markdown report to this file")
    parser.add_argument("--show", action="store_true", help="print what each tuning target's chain misses or adds "
                        "(never the validation part's: it must not shape a rule)")
    args = parser.parse_args()
    tiers = args.tier or ["cloud3k", "alibaba"]

    # Each gold file with the parts it is scored in: the dev set is split by service, ours are one part each.
    sets = {"prereqs.jsonl": (_gold(DATA / "prereqs.jsonl"), (TUNING, VALIDATION))}
    for path, part in ((TUNING_EXTRA, TUNING), (EXTRA, VALIDATION)):
        if path.exists():
            sets[path.name] = (_gold(path), (part,))
    derived: dict[str, list[str]] = {}
    placed: set[str] = set()
    timings = []
    for tier in tiers:
        tenant, ids, seconds = pool_compile(tier)
        started = time.perf_counter()
        chains = tenant_chains_derive(tenant_id=tenant.pk)
        timings.append(f"{tier}: {len(ids):,} tools, compile {seconds:.0f} s, derive {time.perf_counter() - started:.1f} s")
        known = set(ids.values())
        for rows, _ in sets.values():
            for g in rows:
                if g["target"] in placed or not {g["target"], *g["closure"], *g.get("closure_all", ())} <= known:
                    continue
                placed.add(g["target"])
                key = next(k for k, v in ids.items() if v == g["target"])
                derived[g["target"]] = [ids[m] for m in chains[key].closure if m in ids] if key in chains else []
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"### Prerequisite chains — {now}", "",
             f"Command: `python -m bench.retrieval.chains {' '.join('--tier ' + t for t in tiers)}`. "
             + "; ".join(timings) + ".", "",
             "| set | part | targets | precision | recall | completeness | empty |", "|---|---|---|---|---|---|---|"]
    for name, (rows, parts) in sets.items():
        for part in parts:
            gold = [g for g in rows if g["target"] in placed and (len(parts) == 1 or part_of_tool(g["target"]) == part)]
            if not gold:
                continue
            s = _score(gold, derived)
            empty = [g for g in gold if not g["closure"]]
            chained = sum(bool(derived.get(g["target"])) for g in empty)
            lines.append(f"| {name} | {part} | {int(s['targets'])} | {s['precision']:.3f} | {s['recall']:.3f} | "
                         f"{s['completeness']:.3f} | {chained}/{len(empty)} |")
            if args.show and part == TUNING:
                for g in gold:
                    got, want = set(derived.get(g["target"], ())), set(g["closure"])
                    print(g["target"], "missing", sorted(want - got), "extra", sorted(got - want), file=sys.stderr)
    report = "\n".join(lines) + "\n"
    print(report)
    if args.output:
        with args.output.open("a", encoding="utf-8") as out:
            out.write("\n" + report)


if __name__ == "__main__":
    main()
