"""Which development data may tune the search and which only validates it.

The split is by service, so a validation service's vocabulary, ids and chains never shaped a
choice: a tool id's service (`ec2::DescribeVpcs` → `ec2`) belongs to the tuning part when it is
`ec2` (the service most of the earlier work was done on, and half of the development queries) or
when the SHA-256 of its name is even; every other service only validates. The queries written for
this project (`bench/retrieval/data/`: Alibaba, RestBench, more paraphrases), written before any
result was seen, only validate whatever their service. Fixed here once: moving a service between
parts would void every validation number taken before."""

from __future__ import annotations

import hashlib

TUNING, VALIDATION = "tuning", "validation"
PARTS = (TUNING, VALIDATION)


def part_of_service(service: str) -> str:
    if service == "ec2" or int(hashlib.sha256(service.encode()).hexdigest(), 16) % 2 == 0:
        return TUNING
    return VALIDATION


def part_of_tool(tool_id: str) -> str:
    """The part of a tool id `<service>::<operation>`."""
    return part_of_service(tool_id.split("::", 1)[0])
