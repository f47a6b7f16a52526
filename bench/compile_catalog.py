"""Compile every OpenAPI file of the tool catalog and report tools / warnings / errors per file.

Usage: ``python bench/compile_catalog.py [CATALOG_DIR] [-v]`` (default
``../shared/data/catalog/openapi`` beside the checkout). Exits 1 when any AWS or Alibaba file has errors (those are
generated and must compile cleanly; RestBench files are real-world and may only warn).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apps.catalog.openapi import compile_spec  # noqa: E402

DEFAULT_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "catalog" / "openapi"
STRICT_FOLDERS = ("aws", "alibaba")


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    args = [a for a in argv if a != "-v"]
    root = Path(args[0]) if args else DEFAULT_DIR
    files = sorted(p for p in root.rglob("*") if p.suffix in (".json", ".yaml", ".yml") and p.is_file())
    totals = {"files": 0, "tools": 0, "warnings": 0, "errors": 0}
    failed: list[str] = []
    slowest = (0.0, "")
    started = time.perf_counter()
    for path in files:
        data = path.read_bytes()
        t0 = time.perf_counter()
        result = compile_spec(data)
        elapsed = time.perf_counter() - t0
        slowest = max(slowest, (elapsed, str(path.relative_to(root))))
        rel = path.relative_to(root)
        print(f"{str(rel):50} tools={len(result.tools):5} warnings={len(result.warnings):4} "
              f"errors={len(result.errors):4} {elapsed * 1000:8.1f} ms")
        if verbose or result.errors:
            for problem in (*result.errors, *result.warnings)[:10]:
                print(f"    {problem}")
        totals["files"] += 1
        totals["tools"] += len(result.tools)
        totals["warnings"] += len(result.warnings)
        totals["errors"] += len(result.errors)
        if result.errors and rel.parts[0] in STRICT_FOLDERS:
            failed.append(str(rel))
    total_time = time.perf_counter() - started
    print(f"\nTOTAL files={totals['files']} tools={totals['tools']} warnings={totals['warnings']} "
          f"errors={totals['errors']} time={total_time:.2f} s (slowest {slowest[1]}: {slowest[0] * 1000:.0f} ms)")
    if failed:
        print(f"FAILED: {len(failed)} AWS/Alibaba file(s) with errors: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
