"""Bytes → document: size limit, JSON/YAML parsing, version detection.

JSON goes through orjson (fast path for the multi-megabyte catalog files); anything else is YAML,
parsed with the safe (C, when available) loader. The YAML loader is adjusted so that the result is
always JSON-compatible: mapping keys become strings (``200:`` is a response code, not an int) and
timestamps stay strings (``version: 2024-01-01`` must not become a ``date``).
"""

from __future__ import annotations

import re
from typing import Any

import orjson
import yaml

from .diagnostics import Diagnostics

_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"


def _json_key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return str(key)


class _JsonCompatibleLoader(_BaseLoader):  # type: ignore[misc, valid-type]
    """Safe YAML loader whose output is JSON-compatible (string keys, no timestamps)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[str, Any]:
        self.flatten_mapping(node)  # honour "<<" merge keys like SafeConstructor does
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (list, dict)):
                raise yaml.constructor.ConstructorError(None, None, "unhashable mapping key", key_node.start_mark)
            mapping[_json_key(key)] = self.construct_object(value_node, deep=deep)
        return mapping


# Copy (not mutate) the resolver table so the global SafeLoader keeps parsing timestamps.
_JsonCompatibleLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

_VERSION_3 = re.compile(r"^3\.([01])(\.\d+)?(-[0-9A-Za-z.-]+)?$")


def load_document(data: bytes | str, max_bytes: int, diag: Diagnostics) -> dict[str, Any] | None:
    """Parse ``data`` (JSON or YAML) into a dict, or record an error at ``""`` and return ``None``.

    The size check happens before any parsing so an oversized upload costs nothing.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if len(raw) > max_bytes:
        diag.error("", f"document is {len(raw):,} bytes, larger than the limit of {max_bytes:,} bytes")
        return None
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    stripped = raw.lstrip()
    if not stripped:
        diag.error("", "document is empty")
        return None
    doc: Any
    if stripped[:1] in (b"{", b"["):
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            # JSON-looking but invalid; YAML (a superset of most JSON) gets a second chance so
            # that e.g. flow-style YAML still loads, otherwise the JSON error is the useful one.
            doc = _load_yaml(raw, diag, json_error=str(exc))
            if doc is None:
                return None
    else:
        doc = _load_yaml(raw, diag)
        if doc is None:
            return None
    if not isinstance(doc, dict):
        diag.error("", f"document must be a JSON/YAML object, not {type(doc).__name__}")
        return None
    return doc


def _load_yaml(raw: bytes, diag: Diagnostics, json_error: str | None = None) -> Any:
    try:
        return yaml.load(raw, Loader=_JsonCompatibleLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        diag.error("", "document is nested too deeply")
    except yaml.YAMLError as exc:
        diag.error("", f"invalid JSON: {json_error}" if json_error else f"invalid YAML: {exc}")
    return None


def detect_version(doc: dict[str, Any], diag: Diagnostics) -> str | None:
    """``"2.0"``, ``"3.0"`` or ``"3.1"`` from the ``swagger``/``openapi`` field, or an error."""
    if "openapi" in doc:
        value = doc["openapi"]
        # YAML turns an unquoted "openapi: 3.0" into the float 3.0; accept it.
        text = str(value) if isinstance(value, (str, float)) else ""
        match = _VERSION_3.match(text)
        if not match:
            diag.error("/openapi", f"unsupported OpenAPI version {value!r} (supported: 2.0, 3.0.x, 3.1.x)")
            return None
        return f"3.{match.group(1)}"
    if "swagger" in doc:
        if str(doc["swagger"]) != "2.0":
            diag.error("/swagger", f"unsupported Swagger version {doc['swagger']!r} (supported: 2.0)")
            return None
        return "2.0"
    diag.error("", "not an OpenAPI document: it has neither an 'openapi' nor a 'swagger' field")
    return None
