"""The compiler: one OpenAPI operation → exactly one MCP tool.

Pure function of its input (no I/O, no framework): :func:`compile_spec` is safe to run in a worker
and its result can be cached by the document's hash.
"""

from __future__ import annotations

import re
from typing import Any

from apps.common.http_syntax import target_problem, text_problem

from .diagnostics import Diagnostics, join
from .loader import detect_version, load_document
from .model import CompiledTool, CompileOptions, CompileResult, ToolBinding
from .params import Body, Context, build_input, gather, is_json, parameters_to_args, pick_media_type
from .refs import RefResolver
from .schemas import SchemaBudgetExceeded, SchemaConverter, is_object_schema
from .security import security_names_check, security_schemes
from .tool_names import NameAllocator, fallback_base, sanitize

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_SERVER_VARIABLE = re.compile(r"{([^{}]+)}")
_2XX = re.compile(r"^2(\d\d|XX|xx)$")
_DEFAULT_OPTIONS = CompileOptions()  # immutable, so one shared default is safe
_OPERATION_FIELDS = frozenset({
    "tags", "summary", "description", "externalDocs", "operationId", "parameters", "requestBody", "responses",
    "callbacks", "deprecated", "security", "servers", "consumes", "produces", "schemes",
})


def compile_spec(data: bytes | str, *, options: CompileOptions = _DEFAULT_OPTIONS) -> CompileResult:
    """Compile a Swagger 2.0 / OpenAPI 3.0 / 3.1 document (JSON or YAML bytes) into MCP tools.

    Never raises for bad input: every problem found is reported as a :class:`Problem` with its JSON
    pointer. If any error is found the result has no tools; tolerable defects are warnings.
    """
    diag = Diagnostics()
    doc = load_document(data, options.max_bytes, diag)
    if doc is None:
        return CompileResult(errors=tuple(diag.errors))
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    title, version = str(info.get("title") or ""), str(info.get("version") or "")
    spec_version = detect_version(doc, diag)
    if spec_version is None:
        return CompileResult(errors=tuple(diag.errors), title=title, version=version)
    refs = RefResolver(doc, diag)
    schemas = SchemaConverter(refs, diag, version=spec_version, max_depth=options.max_schema_depth,
                              max_nodes=options.max_schema_nodes)
    ctx = Context(spec_version, refs, schemas, diag)
    security_names_check(doc, diag)
    tools: list[CompiledTool] = []
    try:
        tools = _compile_paths(ctx, doc, options)
    except SchemaBudgetExceeded as exc:
        diag.error(exc.pointer, f"schemas too large: more than {options.max_schema_nodes:,} nodes to inline")
    except RecursionError:
        diag.error("", "document is nested too deeply")
    return CompileResult(
        tools=() if diag.errors else tuple(tools),
        warnings=tuple(diag.warnings),
        errors=tuple(diag.errors),
        title=title,
        version=version,
        spec_version=spec_version,
        security=security_schemes(doc),
    )


def _compile_paths(ctx: Context, doc: dict[str, Any], options: CompileOptions) -> list[CompiledTool]:
    paths = doc.get("paths")
    if paths is None:
        if ctx.version != "3.1":  # 3.1 made paths optional (webhook-only documents)
            ctx.diag.error("", "document has no 'paths'")
        return []
    if not isinstance(paths, dict):
        ctx.diag.error("/paths", "'paths' must be an object")
        return []
    root_servers = _root_servers(ctx, doc)
    global_consumes = _consumes(ctx, doc.get("consumes"), "/consumes") or []
    global_produces = doc.get("produces") if isinstance(doc.get("produces"), list) else None
    names = NameAllocator(options.max_name_length)
    first_seen: dict[str, str] = {}
    tools: list[CompiledTool] = []
    for path, raw_item in paths.items():
        item_ptr = join("/paths", path)
        if path.startswith("x-"):
            continue
        if (problem := target_problem(path, "the path")) is not None:
            ctx.diag.error(item_ptr, problem)  # it is written into the request line as it stands
            continue
        if not path.startswith("/"):
            ctx.diag.warning(item_ptr, "path does not start with '/'")
        found = ctx.follow_object(raw_item, item_ptr, "path item")
        if found is None:
            continue
        item_ptr, item = found
        item_servers = _servers(ctx, item.get("servers"), join(item_ptr, "servers")) or root_servers
        for method, op in item.items():
            if method not in METHODS:
                continue
            op_ptr = join(item_ptr, method)
            if not isinstance(op, dict):
                ctx.diag.error(op_ptr, "operation must be an object")
                continue
            for field in op:
                if field not in _OPERATION_FIELDS and not field.startswith("x-"):
                    # Strict validators reject these; clients ignore them, and so do we.
                    ctx.diag.warning(join(op_ptr, field), f"unknown operation field {field!r}; ignored")
            deprecated = op.get("deprecated") is True
            if deprecated and not options.include_deprecated:
                continue
            operation_id = op.get("operationId")
            if operation_id is not None and not isinstance(operation_id, str):
                ctx.diag.warning(join(op_ptr, "operationId"), "operationId must be a string; ignored")
                operation_id = None
            base = sanitize(operation_id) if operation_id else ""
            if operation_id and not base:
                ctx.diag.warning(join(op_ptr, "operationId"), "operationId has no usable characters")
            name = names.allocate(base or fallback_base(method, path))
            if operation_id:
                if operation_id in first_seen:
                    ctx.diag.warning(join(op_ptr, "operationId"), f"duplicate operationId {operation_id!r} "
                                     f"(first at {first_seen[operation_id]}); tool named {name!r}")
                else:
                    first_seen[operation_id] = op_ptr
            params = gather(ctx, item.get("parameters"), join(item_ptr, "parameters"),
                            op.get("parameters"), join(op_ptr, "parameters"))
            consumes = _consumes(ctx, op.get("consumes"), join(op_ptr, "consumes"))
            consumes = global_consumes if consumes is None else consumes
            args, body = parameters_to_args(ctx, params, path, item_ptr, consumes)
            if ctx.version != "2.0" and "requestBody" in op:
                body = _request_body(ctx, op["requestBody"], join(op_ptr, "requestBody"))
            input_schema, bindings, body_mode = build_input(args, body)
            produces = op.get("produces") if isinstance(op.get("produces"), list) else global_produces
            servers = _servers(ctx, op.get("servers"), join(op_ptr, "servers")) or item_servers
            binding = ToolBinding(method.upper(), path, servers, bindings, body_mode,
                                  body.content_type if body else None, bool(body and body.required))
            tools.append(CompiledTool(
                name=name,
                description=_description(op, method, path, options.max_description_length),
                input_schema=input_schema,
                output_schema=_output_schema(ctx, op.get("responses"), join(op_ptr, "responses"), produces),
                annotations=_annotations(method, op),
                binding=binding,
                operation_id=operation_id,
                pointer=op_ptr,
                deprecated=deprecated,
                tags=operation_tags(op.get("tags")),
            ))
    return tools


def _request_body(ctx: Context, raw: Any, ptr: str) -> Body | None:
    found = ctx.follow_object(raw, ptr, "requestBody")
    if found is None:
        return None
    rptr, body = found
    content = body.get("content")
    if not isinstance(content, dict) or not content:
        ctx.diag.warning(rptr, "requestBody has no 'content'; ignored")
        return None
    content_type = pick_media_type(list(content))
    media = content[content_type]
    media_ptr = join(rptr, "content", content_type)
    if (problem := text_problem(content_type, "the media type")) is not None:
        ctx.diag.error(media_ptr, problem)  # it is sent as the Content-Type header
        return None
    schema: Any = {}
    if isinstance(media, dict) and "schema" in media:
        schema = ctx.schemas.convert(media["schema"], join(media_ptr, "schema"))
    return Body(content_type, schema, body.get("required") is True, body.get("description"))


def _output_schema(ctx: Context, responses: Any, ptr: str, produces: list[str] | None) -> dict[str, Any] | None:
    """Schema of the first 2xx response (document order) with a JSON body, if it is an object."""
    if not isinstance(responses, dict):
        return None
    for code, raw in responses.items():
        if not _2XX.match(code):
            continue
        found = ctx.refs.follow(raw, join(ptr, code))
        if found is None or not isinstance(found[1], dict):
            continue
        rptr, response = found
        if ctx.version == "2.0":
            if "schema" not in response or (produces and not any(is_json(t) for t in produces)):
                continue
            schema = ctx.schemas.convert(response["schema"], join(rptr, "schema"))
        else:
            content = response.get("content")
            if not isinstance(content, dict):
                continue
            json_types = [t for t in content if is_json(t)]
            if not json_types:
                continue
            media_type = pick_media_type(json_types)
            media = content[media_type]
            if not isinstance(media, dict) or "schema" not in media:
                continue
            schema = ctx.schemas.convert(media["schema"], join(rptr, "content", media_type, "schema"))
        if is_object_schema(schema):
            return schema if "type" in schema else {**schema, "type": "object"}
        return None
    return None


def _description(op: dict[str, Any], method: str, path: str, limit: int) -> str:
    summary = op.get("summary").strip() if isinstance(op.get("summary"), str) else ""
    details = op.get("description").strip() if isinstance(op.get("description"), str) else ""
    if summary and details and not details.startswith(summary.rstrip(".")):
        text = f"{summary}\n\n{details}"
    else:  # generators often repeat the summary as the first sentence of the description
        text = details or summary or f"{method.upper()} {path}"
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


#: Tags an operation keeps, and their length: enough for any spec seen, bounded against hostile ones.
_TAGS_MAX, _TAG_MAX_LENGTH = 32, 200


def operation_tags(raw: Any) -> tuple[str, ...]:
    """The operation's tags (strings, in order, once each); anything else in the list is ignored."""
    if not isinstance(raw, list):
        return ()
    return tuple(dict.fromkeys(t for t in raw if isinstance(t, str) and t and len(t) <= _TAG_MAX_LENGTH))[:_TAGS_MAX]


def _annotations(method: str, op: dict[str, Any]) -> dict[str, Any]:
    annotations: dict[str, Any] = {}
    if isinstance(op.get("summary"), str) and op["summary"].strip():
        annotations["title"] = op["summary"].strip()
    if method in ("get", "head"):
        annotations["readOnlyHint"] = True
    if method == "delete":
        annotations["destructiveHint"] = True
    if method in ("put", "delete"):
        annotations["idempotentHint"] = True
    return annotations


def _root_servers(ctx: Context, doc: dict[str, Any]) -> tuple[str, ...]:
    if ctx.version != "2.0":
        return _servers(ctx, doc.get("servers"), "/servers") or ("",)
    base_path = doc.get("basePath") if isinstance(doc.get("basePath"), str) else ""
    host = doc.get("host") if isinstance(doc.get("host"), str) else ""
    for field, text in (("host", host), ("basePath", base_path)):
        if (problem := target_problem(text, f"the {field}")) is not None:
            ctx.diag.error(join("", field), problem)
    if not host:
        return (base_path.rstrip("/"),)
    schemes = [s for s in doc.get("schemes") or ["https"] if s in ("http", "https")] or ["https"]
    # Prefer https: the gateway should not downgrade when the API offers both.
    schemes.sort(key=lambda s: s != "https")
    return tuple(f"{scheme}://{host}{base_path}".rstrip("/") for scheme in schemes)


def _servers(ctx: Context, servers: Any, ptr: str) -> tuple[str, ...]:
    """OpenAPI 3 server URLs with variables replaced by their defaults (empty when none)."""
    if servers is None:
        return ()
    if not isinstance(servers, list):
        ctx.diag.warning(ptr, "'servers' must be an array; ignored")
        return ()
    urls: list[str] = []
    for index, server in enumerate(servers):
        if not isinstance(server, dict) or not isinstance(server.get("url"), str):
            ctx.diag.warning(join(ptr, index), "server needs a string 'url'; ignored")
            continue
        variables = server.get("variables") if isinstance(server.get("variables"), dict) else {}
        _check_server(ctx, server["url"], variables, join(ptr, index))

        def substitute(match: re.Match[str], variables: dict = variables, where: str = join(ptr, index)) -> str:
            variable = variables.get(match.group(1))
            if isinstance(variable, dict) and "default" in variable:
                return str(variable["default"])
            ctx.diag.warning(where, f"server variable {match.group(1)!r} has no default; left as is")
            return match.group(0)

        urls.append(_SERVER_VARIABLE.sub(substitute, server["url"]).rstrip("/"))
    return tuple(urls)


def _consumes(ctx: Context, consumes: Any, ptr: str) -> list[str] | None:
    """A Swagger 2.0 ``consumes`` list (None when absent or not a list); any of its media types
    may be sent as the Content-Type header, so one with control characters is an error."""
    if not isinstance(consumes, list):
        return None
    for index, media_type in enumerate(consumes):
        if isinstance(media_type, str) and (problem := text_problem(media_type, "the media type")) is not None:
            ctx.diag.error(join(ptr, index), problem)
    return consumes


def _check_server(ctx: Context, url: str, variables: dict[str, Any], ptr: str) -> None:
    """Errors for a server URL, or a value of its variables, that could not stand in a request
    line: the substituted URL is written into it (enum values are what a default may be)."""
    if (problem := target_problem(url, "the server URL")) is not None:
        ctx.diag.error(join(ptr, "url"), problem)
    for name, variable in variables.items():
        if not isinstance(variable, dict):
            continue
        values = [(join(ptr, "variables", name, "default"), variable.get("default"))]
        if isinstance(variable.get("enum"), list):
            values += [(join(ptr, "variables", name, "enum", i), value) for i, value in enumerate(variable["enum"])]
        for where, value in values:
            if value is not None and (problem := target_problem(str(value), "the server variable's value")):
                ctx.diag.error(where, problem)
