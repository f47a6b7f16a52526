"""Invoker core: a ``tools/call`` of a compiled OpenAPI tool → an HTTP request, and the HTTP response →
an MCP ``CallToolResult``. Pure (stdlib + orjson): the transport lives elsewhere.

**Serialisation** follows the OpenAPI 3.1.1 style table (RFC 6570 based):

* path — ``simple`` / ``label`` / ``matrix``, explode on or off; every character outside RFC 3986
  *unreserved* is percent-encoded inside a value (so ``/``, ``?``, ``#``, ``,`` … cannot escape the
  segment); a value that would form the dot segment ``.`` or ``..`` is sent as ``%2E``/``%2E%2E`` and an
  empty path value is refused (it would change which resource the URL names);
* query — ``form`` (explode on/off), ``spaceDelimited`` (``%20``), ``pipeDelimited`` (``%7C``),
  ``tabDelimited`` (``%09``, what the compiler maps Swagger ``tsv`` to) and ``deepObject``
  (``color%5BR%5D=100``; nested objects recurse, ``a[b][c]``). The delimited styles with ``explode: true``
  (undefined by the spec) behave like exploded ``form``. ``allowReserved`` leaves ``:/?[]@!$'()*,;``
  unencoded but still encodes ``&``, ``=``, ``#`` and ``+``, which would change the query's structure;
* header — ``simple``, no percent-encoding; a value containing CR, LF or NUL is refused;
* cookie — ``form``; pairs joined with ``"; "`` into one ``Cookie`` header; characters that are not
  RFC 6265 cookie-octets (and ``%``) are percent-encoded.

Scalars are rendered as ``true``/``false`` for booleans and ``str()`` for numbers; arrays/objects nested
inside an array or object value are rendered as JSON text. Parameters defined with ``content`` instead of
``schema`` are serialised as JSON text (JSON media types) or ``str()``, then encoded for their location.

**None** — an argument whose value is ``None`` (JSON ``null``) is treated as absent for path, query,
header and cookie parameters (and so is *missing* when required); body arguments send ``null``.

**Bodies** — JSON media types: ``orjson`` of the body object (``body_mode="properties"``) or of the value
(``"whole"``); ``application/x-www-form-urlencoded``: ``key=value`` with ``+`` for spaces, arrays repeat
the key, objects are sent as JSON text; ``multipart/form-data``: one part per property, arrays of scalars
as repeated parts, objects/arrays of non-scalars as a JSON part (``Content-Type: application/json``).
Any other media type: a string is sent as UTF-8, anything else as JSON. An optional body with no body
argument given is not sent; a required one with all properties omitted is sent as ``{}`` (empty form).
``headers`` contains ``Content-Type`` (and ``Cookie``) itself; ``content_type`` repeats it for convenience.

**Base URL rule** — the spec's first server URL is used, with its path prefix (``https://h/v1`` + ``/pets``
→ ``https://h/v1/pets``). ``base_url`` overrides it: if the spec's server URL is *absolute* it is replaced
entirely, prefix included (``base_url`` is the new server URL); if it is *relative* (``/api/v3``, as
uploaded specs often have, or ``""``) it is resolved against ``base_url`` (``base_url + "/api/v3" + path``),
as OpenAPI resolves relative servers against the document's location. Without an absolute result,
:class:`InvokeError` is raised.

Plans (per-tool precomputation) are cached by the identity of the :class:`CompiledTool`. Each plan
carries a builder generated for the tool (``codegen``) that applies these rules as straight-line code;
:func:`build_request_reference` applies them by walking the plan generically and is the reference the
generated builders are tested against.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from .codegen import Builder, generate
from .encoding import (
    credential_apply,
    encode,
    encode_cookie,
    encode_reserved,
    header_renderer,
    missing_arguments_error,
    object_body,
    path_renderer,
    query_appender,
    server_url,
    unknown_arguments_error,
    whole_body,
)
from .model import CompiledTool
from .outgoing import BAD_HEADER, MISSING, ArgumentError, Credential, OutgoingRequest

# --------------------------------------------------------------------------- plans

_PATH, _QUERY, _HEADER, _COOKIE, _BODY = range(5)
_LOCATION_CODE = {"path": _PATH, "query": _QUERY, "header": _HEADER, "cookie": _COOKIE, "body": _BODY}
_TEMPLATE = re.compile(r"{([^{}]+)}")


@dataclass(frozen=True, slots=True)
class PlanEntry:
    argument: str
    code: int
    name: str | None
    fn: Any  # Appender (query/cookie), Renderer (path/header) or None (body)
    slot: int = -1  # index into the path pieces, for path arguments
    #: Fast path for ``str``/``int`` values of query/cookie/header parameters (not ``content``-typed):
    #: query/cookie append ``prefix + enc(text)``; headers use the text as is.
    fast: bool = False
    prefix: str = ""
    enc: Any = None


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything about a tool's request that does not depend on the arguments."""

    method: str
    server: str
    pieces: tuple[str, ...]  # path template split on placeholders; odd indexes are filled
    entries: tuple[PlanEntry, ...]
    arguments: frozenset[str]
    required: tuple[str, ...]
    body_mode: str
    body_kind: str  # "json", "form", "multipart", "other" or "none"
    body_content_type: str | None
    body_required: bool
    query_joiner: str  # "?" or "&" (when the path template already has a query)
    header_names: frozenset[str]  # lower-cased names of the header parameters
    build: Builder  # generated for this tool (codegen), or the generic walk
    generated: bool = False
    #: No builder will be generated: it was (``generated``), or the tool keeps the generic walk for good
    #: (generation failed, or the tool's bindings do not allow it).
    settled: bool = False


def _not_generated(*_: Any) -> OutgoingRequest:
    raise AssertionError("the plan's builder has not been generated yet")


def _body_kind(content_type: str | None) -> str:
    low = (content_type or "").lower()
    if not low:
        return "none"
    if "json" in low:
        return "json"
    if low.startswith("application/x-www-form-urlencoded"):
        return "form"
    if low.startswith("multipart/form-data"):
        return "multipart"
    return "other"


def make_plan(tool: CompiledTool, *, generated: bool = False) -> Plan:
    binding = tool.binding
    pieces = _TEMPLATE.split(binding.path)  # [lit, name, lit, name, lit ...]
    slots = {pieces[i]: i for i in range(1, len(pieces), 2)}
    entries: list[PlanEntry] = []
    for b in binding.arguments:
        code = _LOCATION_CODE[b.location]
        if code == _PATH:
            slot = slots.get(b.name or b.argument, -1)
            entries.append(PlanEntry(b.argument, code, b.name, path_renderer(b), slot))
        elif code in (_QUERY, _COOKIE):
            enc = encode_cookie if code == _COOKIE else encode_reserved if b.allow_reserved else encode
            fn = query_appender(b, enc)
            entries.append(PlanEntry(b.argument, code, b.name, fn, fast=b.content_type is None,
                                  prefix=enc(b.name or b.argument) + "=", enc=enc))
        elif code == _HEADER:
            entries.append(PlanEntry(b.argument, code, b.name, header_renderer(b), fast=b.content_type is None))
        else:
            entries.append(PlanEntry(b.argument, code, b.name, None))
    draft = Plan(
        method=binding.method,
        server=binding.servers[0] if binding.servers else "",
        pieces=tuple(pieces),
        entries=tuple(entries),
        arguments=frozenset(e.argument for e in entries),
        required=tuple(b.argument for b in binding.arguments if b.required),
        body_mode=binding.body_mode,
        body_kind=_body_kind(binding.body_content_type) if binding.body_mode != "none" else "none",
        body_content_type=binding.body_content_type,
        body_required=binding.body_required,
        query_joiner="&" if "?" in binding.path else "?",
        header_names=frozenset((e.name or "").lower() for e in entries if e.code == _HEADER),
        build=_not_generated,
    )
    if not generated or len(draft.arguments) < len(entries):
        # Two bindings of one argument (the compiler never makes them): the generated builders
        # count on unique names, so such a hand-made tool keeps the generic walk.
        return replace(draft, build=partial(_build_generic, draft), settled=generated)
    return replace(draft, build=generate(draft, binding.arguments, tool.name), generated=True, settled=True)


_PLANS: dict[int, tuple[CompiledTool, Plan]] = {}
_MAX_PLANS = 16_384


def _cached(tool: CompiledTool) -> Plan | None:
    hit = _PLANS.get(id(tool))
    return hit[1] if hit is not None and hit[0] is tool else None


def _store(tool: CompiledTool, plan: Plan) -> Plan:
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[id(tool)] = (tool, plan)
    return plan


def plan_for(tool: CompiledTool) -> Plan:
    """The cached :class:`Plan` of ``tool`` (keyed by identity; the tool is kept alive by the cache).
    A new plan walks the bindings generically until :func:`prepare_builder` generates its builder."""
    return _cached(tool) or _store(tool, make_plan(tool))


def has_builder(tool: CompiledTool) -> bool:
    """Whether ``tool``'s builder is settled: generated already, or the generic walk for good (the
    generation failed or cannot apply), so :func:`prepare_builder` has nothing left to do."""
    plan = _cached(tool)
    return plan is not None and plan.settled


def prepare_builder(tool: CompiledTool) -> None:
    """Generate and cache ``tool``'s builder (~0.4 ms per argument): meant to run off the request
    path, e.g. in a worker thread after a tool's first call. Idempotent and safe to race.

    If the generation fails, the tool keeps the generic walk (the reference the generated builders
    are tested against), marked settled so that it is not tried again on every call, and the error
    is raised for the caller to log."""
    if has_builder(tool):
        return
    try:
        plan = make_plan(tool, generated=True)
    except Exception:
        _store(tool, replace(plan_for(tool), settled=True))
        raise
    _store(tool, plan)


# --------------------------------------------------------------------------- build_request


def build_request(
    tool: CompiledTool,
    arguments: Mapping[str, Any],
    *,
    base_url: str | None = None,
    credential: Credential | None = None,
    boundary: str | None = None,
) -> OutgoingRequest:
    """The HTTP request for a call of ``tool`` with ``arguments`` (see the module rules).

    Raises :class:`ArgumentError` for missing/unknown/unserialisable arguments and header values with
    CR/LF, and :class:`InvokeError` when no absolute URL can be formed. ``boundary`` fixes the multipart
    boundary (default: ``mcpgw-boundary-<counter>``).
    """
    if type(arguments) is dict:  # what JSON gives; the generated builders count on dict behaviour
        return plan_for(tool).build(arguments, base_url, credential, boundary)
    if not isinstance(arguments, Mapping):
        raise ArgumentError("arguments must be an object")
    return _build_generic(plan_for(tool), arguments, base_url, credential, boundary)


def build_request_reference(
    tool: CompiledTool,
    arguments: Mapping[str, Any],
    *,
    base_url: str | None = None,
    credential: Credential | None = None,
    boundary: str | None = None,
) -> OutgoingRequest:
    """:func:`build_request` by the generic walk over the plan, without the generated builder: the
    reference for tests and the benchmark."""
    if not isinstance(arguments, Mapping):
        raise ArgumentError("arguments must be an object")
    return _build_generic(plan_for(tool), arguments, base_url, credential, boundary)


def _build_generic(plan: Plan, arguments: Mapping[str, Any], base_url: str | None, credential: Credential | None,
                   boundary: str | None) -> OutgoingRequest:
    pieces: list[str] | None = None
    query: list[str] = []
    headers: list[tuple[str, str]] = []
    cookies: list[str] = []
    body_values: dict[str, Any] = {}
    whole: Any = MISSING
    seen = 0
    missing: list[str] | None = None
    get = arguments.get
    for entry in plan.entries:
        value = get(entry.argument, MISSING)
        if value is MISSING:
            continue
        seen += 1
        code = entry.code
        if code == _BODY:
            if entry.name is None:
                whole = value
            else:
                body_values[entry.name] = value
            continue
        if value is None:
            continue
        if entry.fast:
            kind = type(value)
            if kind is str:
                if code == _HEADER:
                    if BAD_HEADER(value):
                        raise ArgumentError(f"header {entry.name!r} must not contain CR, LF or NUL characters")
                    headers.append((entry.name, value))
                elif code == _QUERY:
                    query.append(entry.prefix + entry.enc(value))
                else:
                    cookies.append(entry.prefix + entry.enc(value))
                continue
            if kind is int:  # digits and "-" need no encoding
                if code == _HEADER:
                    headers.append((entry.name, str(value)))
                elif code == _QUERY:
                    query.append(entry.prefix + str(value))
                else:
                    cookies.append(entry.prefix + str(value))
                continue
        if code == _QUERY:
            entry.fn(value, query)
        elif code == _HEADER:
            headers.append((entry.name, entry.fn(value)))
        elif code == _PATH:
            if pieces is None:
                pieces = list(plan.pieces)
            if entry.slot >= 0:
                pieces[entry.slot] = entry.fn(value)
        else:
            entry.fn(value, cookies)
    if seen != len(arguments):
        raise unknown_arguments_error(arguments, plan.arguments)
    for name in plan.required:
        if get(name) is None:
            missing = missing or []
            missing.append(name)
    if missing:
        raise missing_arguments_error(missing)

    path = "".join(pieces) if pieces is not None else "".join(plan.pieces)
    server = server_url(plan.server, base_url)

    body = b""
    content_type: str | None = None
    if plan.body_mode == "properties":
        if body_values or plan.body_required:
            body, content_type = object_body(plan.body_kind, plan.body_content_type, body_values, boundary)
    elif plan.body_mode == "whole" and whole is not MISSING:
        body, content_type = whole_body(plan.body_kind, plan.body_content_type, whole, boundary)

    if credential is not None:
        credential_apply(credential, headers, query, cookies, plan.header_names)
    if cookies:
        headers.append(("Cookie", "; ".join(cookies)))
    if content_type is not None:
        headers.append(("Content-Type", content_type))
    url = server + path
    if query:
        url = url + plan.query_joiner + "&".join(query)
    return OutgoingRequest(plan.method, url, tuple(headers), body, content_type)

