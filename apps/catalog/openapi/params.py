"""Parameters and request bodies → ``inputSchema`` + argument bindings.

**Body rule**: a JSON (``application/json``, ``*+json``) or form (``x-www-form-urlencoded``,
``multipart/form-data``) body whose schema is a plain object schema (``type: object``, no
``allOf``/``anyOf``/``oneOf``/``not``/``if``) is *flattened*: each body property becomes a top-level
argument (required when the body is required and the property is listed in ``required``); the
binding's ``body_mode`` is ``"properties"``. Any other body becomes a single argument named ``body``
(``body_mode="whole"``). Flattening drops ``additionalProperties`` at the body's top level: tools
only send declared properties.

**Clash rule**: arguments are laid out by location — path, query, header, cookie, body — in
declaration order within a location. The first claimant of a name keeps it; a later one becomes
``<location>_<name>`` (e.g. ``query_id``, ``body_id``) and, should that be taken too,
``<location>_<name>_2``, ``_3``…; the binding records the original name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from apps.common.http_syntax import header_name_problem, text_problem

from .diagnostics import Diagnostics, join
from .model import ArgumentBinding, BodyMode, Location
from .refs import RefResolver
from .schemas import SchemaConverter, is_object_schema
from .tool_names import argument_name, cap

_PRIORITY = {"path": 0, "query": 1, "header": 2, "cookie": 3, "body": 4}
_V3_LOCATIONS = ("path", "query", "header", "cookie")
_V2_LOCATIONS = ("path", "query", "header", "body", "formData")
# OpenAPI 3: "If in is header and name is Accept, Content-Type or Authorization, the parameter
# definition SHALL be ignored" — the content type and security scheme carry those.
_IGNORED_V3_HEADERS = frozenset({"accept", "content-type", "authorization"})
_V2_COLLECTION = {"csv": ("form", False), "ssv": ("spaceDelimited", False), "tsv": ("tabDelimited", False),
                  "pipes": ("pipeDelimited", False), "multi": ("form", True)}
_V2_NON_SCHEMA = frozenset({"name", "in", "required", "description", "allowEmptyValue", "collectionFormat", "schema"})
_TEMPLATE = re.compile(r"{([^{}]+)}")


@dataclass(slots=True)
class Context:
    """Per-document state shared by the compilation steps."""

    version: str
    refs: RefResolver
    schemas: SchemaConverter
    diag: Diagnostics

    def follow_object(self, raw: Any, ptr: str, what: str) -> tuple[str, dict[str, Any]] | None:
        """`raw` with its `$ref` followed, as (pointer, object); None, with the problem reported,
        when the reference is broken or the target is not an object."""
        found = self.refs.follow(raw, ptr)
        if found is None:
            return None
        target_ptr, target = found
        if not isinstance(target, dict):
            self.diag.error(target_ptr, f"{what} must be an object")
            return None
        return target_ptr, target


@dataclass(slots=True)
class Arg:
    location: Location
    name: str | None
    schema: Any
    required: bool
    style: str | None = None
    explode: bool | None = None
    allow_reserved: bool = False
    content_type: str | None = None


@dataclass(slots=True)
class Body:
    content_type: str | None
    schema: Any
    required: bool
    description: str | None = None


def pick_media_type(types: list[str]) -> str | None:
    """The media type a tool sends/reads: JSON first, then forms, else the first listed."""
    lowered = [t.lower() for t in types]
    for test in (lambda t: t.split(";")[0].strip() == "application/json",
                 lambda t: "json" in t,
                 lambda t: t.startswith("application/x-www-form-urlencoded"),
                 lambda t: t.startswith("multipart/form-data")):
        for original, low in zip(types, lowered, strict=True):
            if test(low):
                return original
    return types[0] if types else None


def is_json(media_type: str | None) -> bool:
    return media_type is not None and "json" in media_type.lower()


def _is_form(media_type: str | None) -> bool:
    low = (media_type or "").lower()
    return low.startswith("application/x-www-form-urlencoded") or low.startswith("multipart/form-data")


def gather(ctx: Context, path_level: Any, path_ptr: str, op_level: Any, op_ptr: str) -> list[tuple[str, dict]]:
    """Path-item then operation parameters (resolved), operation ones overriding by (in, name)."""
    merged: dict[tuple[str, str], tuple[str, dict]] = {}
    locations = _V2_LOCATIONS if ctx.version == "2.0" else _V3_LOCATIONS
    for raw_list, ptr in ((path_level, path_ptr), (op_level, op_ptr)):
        if raw_list is None:
            continue
        if not isinstance(raw_list, list):
            ctx.diag.error(ptr, "'parameters' must be an array")
            continue
        seen: set[tuple[str, str]] = set()
        for index, raw in enumerate(raw_list):
            site = join(ptr, index)
            found = ctx.follow_object(raw, site, "parameter")
            if found is None:
                continue
            pptr, param = found
            name, loc = param.get("name"), param.get("in")
            valid = True
            if not isinstance(name, str) or not name:
                ctx.diag.error(join(pptr, "name"), "parameter needs a non-empty string 'name'")
                valid = False
            if loc not in locations:
                ctx.diag.error(join(pptr, "in"), f"parameter 'in' must be one of {', '.join(locations)}, not {loc!r}")
                valid = False
            if not valid:
                continue
            if (problem := _name_problem(name, loc)) is not None:
                ctx.diag.error(join(pptr, "name"), problem)
                continue
            key = (loc, name.lower() if loc == "header" else name)
            if key in seen:
                ctx.diag.warning(site, f"duplicate {loc} parameter {name!r}; the first definition wins")
                continue
            seen.add(key)
            merged[key] = (pptr, param)
    return list(merged.values())


def _name_problem(name: str, location: str) -> str | None:
    """Why a parameter's name cannot stand where it is sent: a header's is the header name (an HTTP
    token); query, cookie and form names are percent-encoded, path names are matched against the
    path template, and none may hold control characters. A body parameter's name is not sent."""
    if location == "header":
        return header_name_problem(name)
    if location == "body":
        return None
    return text_problem(name, f"the {location} parameter name")


def _describe(schema: Any, param: dict) -> Any:
    description = param.get("description")
    if isinstance(description, str) and description.strip() and isinstance(schema, dict):
        return {**schema, "description": description.strip()}
    return schema


def parameters_to_args(
    ctx: Context, params: list[tuple[str, dict]], path: str, path_ptr: str, consumes: list[str]
) -> tuple[list[Arg], Body | None]:
    """Arguments for path/query/header/cookie parameters; for Swagger 2.0 also the body built from
    ``in: body`` or ``in: formData`` parameters."""
    args: list[Arg] = []
    body: Body | None = None
    form_props: dict[str, Any] = {}
    form_required: list[str] = []
    has_file = False
    declared_path: set[str] = set()
    for pptr, param in params:
        name, loc = param["name"], param["in"]
        required = param.get("required") is True
        if loc == "body":
            if body is not None:
                ctx.diag.warning(pptr, "more than one body parameter; ignored")
                continue
            if "schema" not in param:
                ctx.diag.warning(pptr, "body parameter has no 'schema'; accepting any value")
            schema = ctx.schemas.convert(param.get("schema", {}), join(pptr, "schema"))
            content_type = pick_media_type(consumes) or "application/json"
            body = Body(content_type, schema, required, param.get("description"))
            continue
        if loc == "header" and ctx.version != "2.0" and name.lower() in _IGNORED_V3_HEADERS:
            ctx.diag.warning(pptr, f"header parameter {name!r} is ignored, as OpenAPI 3 requires")
            continue
        if loc == "path":
            declared_path.add(name)
            if name not in _TEMPLATE.findall(path):
                ctx.diag.warning(pptr, f"path parameter {name!r} does not occur in the path template; ignored")
                continue
            if not required:
                ctx.diag.warning(pptr, "path parameter is not marked required; treated as required")
                required = True
        arg = _v2_arg(ctx, pptr, param, required) if ctx.version == "2.0" else _v3_arg(ctx, pptr, param, required)
        if loc == "formData":
            has_file = has_file or param.get("type") == "file"
            form_props[name] = arg.schema
            if required:
                form_required.append(name)
        else:
            args.append(arg)
    for name in _TEMPLATE.findall(path):
        if name not in declared_path:
            ctx.diag.warning(path_ptr, f"path template variable {{{name}}} has no parameter; added as a string")
            args.append(Arg("path", name, {"type": "string"}, True, "simple", False))
    if form_props:
        if body is not None:
            ctx.diag.warning(path_ptr, "both body and formData parameters; formData ignored")
        else:
            forms = [t for t in consumes if _is_form(t)]
            multipart = has_file or (bool(forms) and forms[0].lower().startswith("multipart/"))
            schema = {"type": "object", "properties": form_props, "required": form_required}
            body = Body("multipart/form-data" if multipart else "application/x-www-form-urlencoded",
                        schema, bool(form_required))
    return args, body


def _v3_arg(ctx: Context, pptr: str, param: dict, required: bool) -> Arg:
    loc = param["in"]
    content_type = None
    if "schema" in param:
        schema = ctx.schemas.convert(param["schema"], join(pptr, "schema"))
    elif isinstance(param.get("content"), dict) and param["content"]:
        content_type = next(iter(param["content"]))
        media = param["content"][content_type]
        raw = media.get("schema", {}) if isinstance(media, dict) else {}
        schema = ctx.schemas.convert(raw, join(pptr, "content", content_type, "schema"))
    else:
        ctx.diag.warning(pptr, "parameter has neither 'schema' nor 'content'; accepting any value")
        schema = {}
    style = param.get("style") if isinstance(param.get("style"), str) else None
    style = style or ("form" if loc in ("query", "cookie") else "simple")
    explode = param.get("explode")
    explode = explode if isinstance(explode, bool) else style == "form"
    allow_reserved = loc == "query" and param.get("allowReserved") is True
    if content_type is not None:
        style, explode = None, None
    return Arg(loc, param["name"], _describe(schema, param), required, style, explode, allow_reserved, content_type)


def _v2_arg(ctx: Context, pptr: str, param: dict, required: bool) -> Arg:
    loc = param["in"]
    if "type" not in param:
        ctx.diag.warning(pptr, "parameter has no 'type'; accepting any value")
    raw = {k: v for k, v in param.items() if k not in _V2_NON_SCHEMA}
    schema = ctx.schemas.convert(raw, pptr)
    style, explode = ("form", True) if loc in ("query", "formData") else ("simple", False)
    if param.get("type") == "array":
        fmt = param.get("collectionFormat", "csv")
        if fmt not in _V2_COLLECTION:
            ctx.diag.warning(join(pptr, "collectionFormat"), f"unknown collectionFormat {fmt!r}; using csv")
            fmt = "csv"
        style, explode = _V2_COLLECTION[fmt]
        if fmt == "csv" and loc in ("path", "header"):
            style = "simple"
    return Arg(loc, param["name"], _describe(schema, param), required, style, explode)


def build_input(args: list[Arg], body: Body | None) -> tuple[dict[str, Any], tuple[ArgumentBinding, ...], BodyMode]:
    """The tool's ``inputSchema`` and the bindings of its properties (see the module rules)."""
    body_mode: BodyMode = "none"
    ordered = sorted(args, key=lambda a: _PRIORITY[a.location])  # stable: declaration order kept
    if body is not None:
        schema = body.schema
        if (is_json(body.content_type) or _is_form(body.content_type)) and is_object_schema(schema):
            body_mode = "properties"
            required = set(schema.get("required", ())) if body.required else set()
            for name, sub in schema.get("properties", {}).items():
                ordered.append(Arg("body", name, sub, name in required))
        else:
            body_mode = "whole"
            description = body.description
            if isinstance(description, str) and description.strip() and isinstance(schema, dict):
                schema = {**schema, "description": description.strip()}
            ordered.append(Arg("body", None, schema, body.required))
    properties: dict[str, Any] = {}
    required_names: list[str] = []
    bindings: list[ArgumentBinding] = []
    for arg in ordered:
        base = argument_name(arg.name if arg.name is not None else "body")
        candidate = base
        if candidate in properties:
            candidate = prefixed = cap(f"{arg.location}_{base}", 64)
            counter = 2
            while candidate in properties:
                candidate = f"{cap(prefixed, 64 - len(str(counter)) - 1)}_{counter}"
                counter += 1
        properties[candidate] = arg.schema
        if arg.required:
            required_names.append(candidate)
        bindings.append(ArgumentBinding(candidate, arg.location, arg.name, arg.required, arg.style, arg.explode,
                                        arg.allow_reserved, arg.content_type))
    input_schema = {"type": "object", "properties": properties, "required": required_names}
    return input_schema, tuple(bindings), body_mode
