#!/usr/bin/env python3
"""Sanity checks for the held-out query and prerequisite files in this folder.

usage: python3 check.py [--catalog ../shared/data/catalog]

Every `tool`, `also_correct`, `target`, `closure` and `prerequisites` id must be a line of the
tier files and (RestBench aside, whose ids come from method + path) an operation of its spec;
`tiers` must be exactly the tier files that list the answer; qids and targets must be unique;
a query of a kind other than `keyword` must not spell its operation id; every aws-paraphrases
answer must be a validation-part `cloud3k` tool and every prerequisite target a validation-part
or Alibaba tool. Prints counts per file and kind; exits 1 on any problem.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
KINDS = {
    "alibaba.jsonl": {"handwritten", "keyword", "id-only"},
    "restbench.jsonl": {"handwritten", "keyword"},
    "aws-paraphrases.jsonl": {"handwritten", "id-only"},
    "aws-paraphrases-2.jsonl": {"handwritten"},
    "aws-ids.jsonl": {"id-only"},
}
PREREQS = "prereqs-extra.jsonl"


def spec_operations(catalog: str) -> set[str]:
    ops = set()
    for path in glob.glob(os.path.join(catalog, "openapi", "*", "*.json")):
        service = os.path.basename(path)[: -len(".json")]
        for item in json.load(open(path))["paths"].values():
            for op in item.values():
                if isinstance(op, dict) and "operationId" in op:
                    ops.add(f"{service}::{op['operationId']}")
    return ops


def read_jsonl(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--catalog", default=os.path.join(REPO, "..", "shared", "data", "catalog"))
    args = ap.parse_args()
    sys.path.insert(0, REPO)
    from bench.retrieval.split import VALIDATION, part_of_tool

    tiers = {
        os.path.basename(p)[: -len(".txt")]: {line.strip() for line in open(p) if line.strip()}
        for p in glob.glob(os.path.join(args.catalog, "tiers", "*.txt"))
    }
    listed = set().union(*tiers.values())
    ops = spec_operations(args.catalog)
    problems: list[str] = []
    counts: Counter[tuple[str, str]] = Counter()

    def check_id(where: str, tool: str) -> None:
        if tool not in listed:
            problems.append(f"{where}: {tool} is in no tier file")
        if not tool.startswith(("tmdb::", "spotify::")) and tool not in ops:
            problems.append(f"{where}: {tool} is no operation of its spec")

    qids: set[str] = set()
    for fname, kinds in sorted(KINDS.items()):
        for q in read_jsonl(os.path.join(HERE, fname)):
            where = f"{fname} {q['qid']}"
            if q["qid"] in qids:
                problems.append(f"{where}: duplicate qid")
            qids.add(q["qid"])
            counts[fname, q["kind"]] += 1
            if q["kind"] not in kinds:
                problems.append(f"{where}: kind {q['kind']}")
            for tool in [q["tool"], *q["also_correct"]]:
                check_id(where, tool)
            if q["tool"] in q["also_correct"]:
                problems.append(f"{where}: the answer is repeated in also_correct")
            want = sorted(t for t, members in tiers.items() if q["tool"] in members)
            if sorted(q["tiers"]) != want:
                problems.append(f"{where}: tiers {q['tiers']}, the tier files say {want}")
            operation = q["tool"].split("::", 1)[1]
            if q["kind"] != "keyword" and re.search(re.escape(operation), q["query"], re.I):
                problems.append(f"{where}: the query spells the operation id")
            if fname.startswith("aws-paraphrases") and (
                part_of_tool(q["tool"]) != VALIDATION or q["tool"] not in tiers["cloud3k"]
            ):
                problems.append(f"{where}: {q['tool']} is not a validation-part cloud3k tool")

    targets: set[str] = set()
    for r in read_jsonl(os.path.join(HERE, PREREQS)):
        where = f"{PREREQS} {r['target']}"
        if r["target"] in targets:
            problems.append(f"{where}: duplicate target")
        targets.add(r["target"])
        counts[PREREQS, "non-empty closure" if r["closure"] else "empty closure"] += 1
        if part_of_tool(r["target"]) != VALIDATION and not r["target"].startswith("alibaba-"):
            problems.append(f"{where}: the target is not in a validation-part service")
        for tool in [r["target"], *r["closure"], *r["closure_all"], *r["prerequisites"]] + [
            d["tool"] for d in r["direct"]
        ]:
            check_id(where, tool)
        if not set(r["prerequisites"]) <= set(r["closure"]) <= set(r["closure_all"]):
            problems.append(f"{where}: prerequisites ⊆ closure ⊆ closure_all does not hold")

    for (fname, kind), n in sorted(counts.items()):
        print(f"{fname:24} {kind:18} {n}")
    print(f"qids: {len(qids)} unique; prerequisite targets: {len(targets)} unique")
    for p in problems:
        print("PROBLEM:", p)
    print(f"{len(problems)} problems" if problems else "OK")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
