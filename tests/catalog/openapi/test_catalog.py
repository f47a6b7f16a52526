"""The compiler against the real catalog files (no database needed)."""

from pathlib import Path

import orjson
import pytest

from apps.catalog.openapi import compile_spec

# The shared data folder lies beside the checkout (../shared), in CI as on a developer's machine.
CATALOG = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "catalog" / "openapi"
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}



def _count_operations(data: bytes) -> tuple[int, int]:
    doc = orjson.loads(data)
    ops = [op for item in doc["paths"].values() for m, op in item.items() if m in METHODS]
    return len(ops), sum(1 for op in ops if op.get("deprecated") is True)


def test_ec2_compiles_cleanly():
    # How fast is measured by bench/compile_catalog.py (BENCHMARKS.md), not asserted here.
    data = (CATALOG / "aws" / "ec2.json").read_bytes()
    result = compile_spec(data)
    total, deprecated = _count_operations(data)
    assert result.errors == ()
    assert len(result.tools) == total - deprecated
    assert len({t.name for t in result.tools}) == len(result.tools)
    subnet = next(t for t in result.tools if t.name == "CreateSubnet")
    assert subnet.binding.servers == ("https://ec2.us-east-1.amazonaws.com",)
    assert subnet.binding.body_mode == "properties" and "VpcId" in subnet.input_schema["required"]
    assert subnet.output_schema is not None and subnet.output_schema["type"] == "object"
    orjson.dumps([(t.input_schema, t.output_schema) for t in result.tools])  # serialisable, finite


@pytest.mark.parametrize("name", ["spotify.json", "tmdb.json"])
def test_restbench_compiles_with_warnings(name):
    data = (CATALOG / "restbench" / name).read_bytes()
    result = compile_spec(data)
    assert result.errors == ()
    assert result.warnings
    total, deprecated = _count_operations(data)
    assert len(result.tools) == total - deprecated


@pytest.mark.parametrize("name", ["alibaba-ecs.json", "alibaba-slb.json", "alibaba-vpc.json"])
def test_alibaba_compiles(name):
    data = (CATALOG / "alibaba" / name).read_bytes()
    result = compile_spec(data)
    assert result.errors == ()
    total, deprecated = _count_operations(data)
    assert len(result.tools) == total - deprecated > 0


@pytest.mark.slow
def test_every_catalog_spec_compiles_without_errors():
    # Guards the checks that refuse strings which would break a request (paths, names, servers):
    # none of the real specs has one.
    files = sorted(p for p in CATALOG.rglob("*.json") if p.is_file())
    assert len(files) == 429
    failed = {str(p.relative_to(CATALOG)): compile_spec(p.read_bytes()).errors for p in files}
    assert {name: errors for name, errors in failed.items() if errors} == {}
