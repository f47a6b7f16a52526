"""Compiled tools as plain JSON records (what the database stores) and back.

``tool_from_record(tool_record(t)) == t`` for every compiled tool. The fingerprint covers everything
a caller or the invoker sees, so two versions of a tool differ exactly when their fingerprints do."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from .model import ArgumentBinding, CompiledTool, ToolBinding


def binding_record(binding: ToolBinding) -> dict[str, Any]:
    return {
        "method": binding.method,
        "path": binding.path,
        "servers": list(binding.servers),
        "body_mode": binding.body_mode,
        "body_content_type": binding.body_content_type,
        "body_required": binding.body_required,
        "arguments": [
            {
                "argument": a.argument,
                "location": a.location,
                "name": a.name,
                "required": a.required,
                "style": a.style,
                "explode": a.explode,
                "allow_reserved": a.allow_reserved,
                "content_type": a.content_type,
            }
            for a in binding.arguments
        ],
    }


def binding_from_record(record: dict[str, Any]) -> ToolBinding:
    return ToolBinding(
        method=record["method"],
        path=record["path"],
        servers=tuple(record["servers"]),
        arguments=tuple(ArgumentBinding(**argument) for argument in record["arguments"]),
        body_mode=record["body_mode"],
        body_content_type=record["body_content_type"],
        body_required=record["body_required"],
    )


def tool_record(tool: CompiledTool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "output_schema": tool.output_schema,
        "annotations": tool.annotations,
        "binding": binding_record(tool.binding),
        "operation_id": tool.operation_id,
        "pointer": tool.pointer,
        "deprecated": tool.deprecated,
        "tags": list(tool.tags),
    }


def tool_from_record(record: dict[str, Any]) -> CompiledTool:
    return CompiledTool(
        name=record["name"],
        description=record["description"],
        input_schema=record["input_schema"],
        output_schema=record["output_schema"],
        annotations=record["annotations"],
        binding=binding_from_record(record["binding"]),
        operation_id=record.get("operation_id"),
        pointer=record.get("pointer", ""),
        deprecated=record.get("deprecated", False),
        tags=tuple(record.get("tags", ())),
    )


def tool_fingerprint(record: dict[str, Any]) -> str:
    """A digest of what a caller sees of the record: not its source pointer (moving an operation in the
    file is no change) nor its tags (only the gateway's curation reads them)."""
    seen = {key: value for key, value in record.items() if key not in ("pointer", "tags")}
    return hashlib.blake2b(orjson.dumps(seen, option=orjson.OPT_SORT_KEYS), digest_size=16).hexdigest()


_INT_MIN, _UINT_MAX = -(2**63), 2**64 - 1  # what orjson encodes
_FLOAT_MAX = 1.7976931348623157e308


def json_safe(value: Any) -> Any:
    """``value`` with every integer orjson cannot encode (beyond 64 bits) as the nearest float."""
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    if isinstance(value, int) and not isinstance(value, bool) and not _INT_MIN <= value <= _UINT_MAX:
        try:
            return float(value)
        except OverflowError:
            return _FLOAT_MAX if value > 0 else -_FLOAT_MAX
    return value
