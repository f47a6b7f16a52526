"""Small helpers for building specs in tests."""

from __future__ import annotations

from typing import Any

import orjson

from apps.catalog.openapi import CompileOptions, CompileResult, compile_spec


def oas3(paths: dict[str, Any], version: str = "3.0.3", **extra: Any) -> dict[str, Any]:
    return {"openapi": version, "info": {"title": "T", "version": "1"}, "paths": paths, **extra}


def run(doc: dict[str, Any], **options: Any) -> CompileResult:
    return compile_spec(orjson.dumps(doc), options=CompileOptions(**options))


def pointers(problems) -> list[str]:
    return [p.pointer for p in problems]


def tool(result: CompileResult, name: str):
    return next(t for t in result.tools if t.name == name)
