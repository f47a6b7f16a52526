"""Per-tool request builders: Python source written from a tool's :class:`~.invoke.Plan` and compiled once.

The generic builder (``invoke._build_generic``) walks the plan's entries on every call and dispatches on
each entry's location and value type; for a 100-argument tool that loop, a call per encoded value and the
attribute look-ups are most of the cost. The generated builder does the same steps as straight-line code,
one block per argument in the plan's order, with the location, style, names and literals fixed in the
source. It handles the common value types itself (``str``, ``int``, a ``list``; the percent-encoding memo
is read without a call) and hands any other value to the very serialiser the generic builder uses, so
both build the same request and raise the same error first. ``tests/catalog/openapi/test_codegen.py``
checks that on every tool of several real specs. ``build_request`` keeps the generic walk for arguments
that are not a plain ``dict`` (the generated code counts on dict behaviour) and for hand-made tools with
a repeated argument name.

The price is paid once per tool and process, when the plan is made: ``compile()`` of the source, about
0.4 ms per argument on the 2-core sandbox (≈ 40 ms for the 100-argument benchmark tool, a few ms for a
typical tool), and a few KiB of code per argument while the plan is cached.

Every text taken from the spec (argument and parameter names, path literals, server, content type)
enters the source through ``repr()``, which always yields a Python literal of the same string: a spec
cannot inject code. Per-argument serialisers and shared helpers are passed in the globals of the
compiled code, never as source.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .assemble import _apply, _missing_arguments, _server, _unknown_arguments
from .bodies import _dumps, _encode_object, _encode_whole
from .calls import _BAD_HEADER, _MISSING, ArgumentError, Credential, OutgoingRequest
from .model import ArgumentBinding
from .serialize import (
    _enc,
    _enc_cookie,
    _enc_cookie_memo,
    _enc_memo,
    _enc_reserved,
    _enc_reserved_memo,
    _guard_segment,
    _text,
)

if TYPE_CHECKING:
    from .invoke import Plan, _Entry

#: ``(arguments, base_url, credential, boundary) -> request``
Builder = Callable[[Mapping[str, Any], str | None, Credential | None, str | None], OutgoingRequest]

#: Globals every generated builder sees; ``f<i>`` (the generic serialiser of entry ``i``) and the
#: per-tool constants listed in :func:`generate_source` are added per tool.
_RUNTIME: dict[str, Any] = {
    "M": _MISSING,
    "OutgoingRequest": OutgoingRequest,
    "ArgumentError": ArgumentError,
    "bad_header": _BAD_HEADER,
    "text": _text,
    "guard": _guard_segment,
    "dumps": _dumps,
    "encode_object": _encode_object,
    "encode_whole": _encode_whole,
    "server_url": _server,
    "apply_credential": _apply,
    "unknown_arguments": _unknown_arguments,
    "missing_arguments": _missing_arguments,
    # Percent-encoders and their memo look-ups: (encoder, memo get) per safe set.
    "E": _enc, "EG": _enc_memo,
    "R": _enc_reserved, "RG": _enc_reserved_memo,
    "C": _enc_cookie, "CG": _enc_cookie_memo,
}
_ENCODER_NAMES = {_enc: ("E", "EG"), _enc_reserved: ("R", "RG"), _enc_cookie: ("C", "CG")}
_DELIMITERS = {"spaceDelimited": "%20", "pipeDelimited": "%7C", "tabDelimited": "%09"}


def generate(plan: Plan, bindings: Sequence[ArgumentBinding], label: str = "tool") -> Builder:
    """Compile the builder of ``plan`` (``bindings`` are the tool's, in the plan's entry order).

    The argument names must be unique, as the compiler makes them: the builder then tells unknown
    arguments by ``KNOWN.issuperset(arguments)`` rather than by counting the ones it used."""
    source, namespace = generate_source(plan, bindings)
    code = compile(source, f"<openapi request builder {label!r}>", "exec")
    exec(code, namespace)  # noqa: S102 - our own source; spec texts are repr() literals (module docstring)
    return namespace["build"]


def generate_source(plan: Plan, bindings: Sequence[ArgumentBinding]) -> tuple[str, dict[str, Any]]:
    """The builder's source and the globals it runs with."""
    namespace = dict(_RUNTIME)
    namespace.update(KNOWN=plan.arguments, HEADER_NAMES=plan.header_names)
    filled = sorted({e.slot for e in plan.entries if e.slot >= 0})  # only path entries have a slot
    out = ["def build(arguments, base_url, credential, boundary):",
           "    get = arguments.get",
           "    missing = []",
           "    query = []",
           "    headers = []",
           "    cookies = []",
           "    body = {}",
           "    whole = M",
           # Bound once: a call per value is cheaper than a method look-up per value.
           "    add_query = query.append",
           "    add_header = headers.append",
           "    add_cookie = cookies.append"]
    # An unfilled placeholder keeps its bare name, as in the generic builder.
    out += [f"    s{slot} = {plan.pieces[slot]!r}" for slot in filled]
    for i, (entry, binding) in enumerate(zip(plan.entries, bindings, strict=True)):
        namespace[f"f{i}"] = entry.fn
        out += _indent(_entry_block(i, entry, binding), 1)
    out += _indent(_tail(plan, filled), 1)
    return "\n".join(out) + "\n", namespace


def _indent(lines: list[str], depth: int) -> list[str]:
    pad = "    " * depth
    return [pad + line for line in lines]


def _encoded(encoder: Callable[[str], str], var: str) -> str:
    """Expression: ``var`` (a ``str``) percent-encoded; the memo first, the encoder on a miss."""
    enc, memo = _ENCODER_NAMES[encoder]
    return f"({memo}({var}) or {enc}({var}))"


def _entry_block(i: int, entry: _Entry, binding: ArgumentBinding) -> list[str]:
    argument = repr(entry.argument)
    # ``get`` without a default: None is both "absent" and "null"; only a body argument asks which.
    lines = [f"v = get({argument})", "if v is not None:"]
    if binding.location == "body":
        target = "whole" if entry.name is None else f"body[{entry.name!r}]"
        lines += [f"    {target} = v", f"elif {argument} in arguments:", f"    {target} = None"]  # sends null
        if binding.required:  # null or absent
            lines += [f"    missing.append({argument})", "else:", f"    missing.append({argument})"]
        return lines
    lines += _indent(_serialise(i, entry, binding), 1)
    if binding.required:  # a null parameter is absent
        lines += ["else:", f"    missing.append({argument})"]
    return lines


def _serialise(i: int, entry: _Entry, binding: ArgumentBinding) -> list[str]:
    """Lines adding the given (not None) value ``v`` of entry ``i`` to the request parts."""
    fn = f"f{i}"
    location = binding.location
    if location == "path":
        return _path(i, entry, binding)
    if location == "header":
        if not entry.fast:
            return [f"add_header(({entry.name!r}, {fn}(v)))"]
        message = f"header {entry.name!r} must not contain CR, LF or NUL characters"
        return ["t = type(v)",
                "if t is str:",
                # Printable text has no CR, LF or NUL; the pattern decides for the rest.
                "    if not v.isprintable() and bad_header(v):",
                f"        raise ArgumentError({message!r})",
                f"    add_header(({entry.name!r}, v))",
                "elif t is int:",
                f"    add_header(({entry.name!r}, str(v)))",
                "else:",
                f"    add_header(({entry.name!r}, {fn}(v)))"]
    out, add = ("query", "add_query") if location == "query" else ("cookies", "add_cookie")
    if not entry.fast:
        return [f"{fn}(v, {out})"]
    prefix = repr(entry.prefix)
    # Every style renders a string or an integer as ``name=value`` (digits and "-" need no encoding).
    lines = ["t = type(v)",
             "if t is str:",
             f"    {add}({prefix} + {_encoded(entry.enc, 'v')})",
             "elif t is int:",
             f"    {add}({prefix} + str(v))"]
    enc, memo = _ENCODER_NAMES[entry.enc]
    style = binding.style or "form"
    exploded = style == "deepObject" or bool(binding.explode)  # deepObject repeats the name per item, too
    if location == "query":
        # A list whose items the percent-encoding memo knows (so they are text) is joined in one C-level
        # pass; any other item makes ``join`` raise TypeError (None for a miss, or unhashable), and then
        # the serialiser takes the list. Exploded, the items go in as one "name=a&name=b" entry: the same
        # URL, and the api_key_query credential drops all of them or none, as it would one by one (they
        # share the "name=" prefix, and an encoded name holds no "=" or "&").
        if exploded:
            lines += ["elif t is list:",
                      "    if v:",
                      "        try:",
                      f"            {add}({prefix} + {'&' + entry.prefix!r}.join(map({memo}, v)))",
                      "        except TypeError:",
                      f"            {fn}(v, {out})"]
        else:
            delimiter = repr(_DELIMITERS.get(style, ","))
            lines += ["elif t is list:",
                      "    try:",
                      f"        {add}({prefix} + {delimiter}.join(map({memo}, v)))",
                      "    except TypeError:",
                      f"        {fn}(v, {out})"]
    else:  # cookies: the api_key_cookie credential weighs each "name=value" pair by itself
        item = f"{_encoded(entry.enc, 'x')} if type(x) is str else {enc}(text(x))"
        if exploded:
            lines += ["elif t is list:", "    for x in v:", f"        {add}({prefix} + ({item}))"]
        else:
            delimiter = repr(_DELIMITERS.get(style, ","))
            lines += ["elif t is list:", f"    {add}({prefix} + {delimiter}.join([{item} for x in v]))"]
    if style == "deepObject":
        # One level of an object inline: ``name[key]=value`` percent-encoded is the encoded ``name[``, key
        # and ``]=`` joined (the encoding goes character by character). Non-text keys and values other
        # than text and integers go through the serialiser's recursion with the key path built so far.
        opening = repr(entry.enc((entry.name or entry.argument) + "["))
        closing = repr(entry.enc("]") + "=")
        lines += ["elif t is dict:",
                  "    for k, x in v.items():",
                  "        u = type(x)",
                  "        if type(k) is not str or (u is not str and u is not int):",
                  f"            {fn}(x, {out}, {(entry.name or entry.argument) + '['!r} + f'{{k}}]')",
                  "        elif u is str:",
                  f"            {add}({opening} + {_encoded(entry.enc, 'k')} + {closing} + {_encoded(entry.enc, 'x')})",
                  "        else:",
                  f"            {add}({opening} + {_encoded(entry.enc, 'k')} + {closing} + str(x))"]
    return lines + ["else:", f"    {fn}(v, {out})"]


def _path(i: int, entry: _Entry, binding: ArgumentBinding) -> list[str]:
    fn = f"f{i}"
    if entry.slot < 0:  # no placeholder to fill: the generic builder does not render it either
        return ["pass"]
    target = f"s{entry.slot}"
    if binding.content_type is not None or binding.style in ("label", "matrix"):
        return [f"{target} = {fn}(v)"]
    name = repr(entry.name or entry.argument)
    return ["t = type(v)",
            "if t is str:",
            f"    {target} = {_encoded(_enc, 'v')}",
            f"    if {target} in ('', '.', '..'):",
            f"        {target} = guard({target}, {name})",
            "elif t is int:",
            f"    {target} = str(v)",
            "else:",
            f"    {target} = {fn}(v)"]


def _tail(plan: Plan, filled: list[int]) -> list[str]:
    lines = ["if not KNOWN.issuperset(arguments):",  # argument names are unique (see generate)
             "    raise unknown_arguments(arguments, KNOWN)",
             "if missing:",
             "    raise missing_arguments(missing)"]
    parts = [repr(piece) if n % 2 == 0 or n not in filled else f"s{n}" for n, piece in enumerate(plan.pieces)]
    lines.append(f"path = ''.join(({', '.join(parts)},))" if filled else f"path = {''.join(plan.pieces)!r}")
    server = repr(plan.server)
    if "://" in plan.server:
        lines.append(f"server = {server} if base_url is None else server_url({server}, base_url)")
    else:
        lines.append(f"server = server_url({server}, base_url)")
    lines += ["payload = b''", "content_type = None"]
    kind, declared = repr(plan.body_kind), repr(plan.body_content_type)
    if plan.body_mode == "properties":
        if plan.body_kind in ("form", "multipart"):
            encode = [f"payload, content_type = encode_object({kind}, {declared}, body, boundary)"]
        else:  # what encode_object does for every other kind, minus the call
            encode = ["payload = dumps(body)", f"content_type = {plan.body_content_type or 'application/json'!r}"]
        # A required body is sent even with every property omitted; an optional one only when given.
        lines += encode if plan.body_required else ["if body:", *_indent(encode, 1)]
    elif plan.body_mode == "whole":
        lines += ["if whole is not M:",
                  f"    payload, content_type = encode_whole({kind}, {declared}, whole, boundary)"]
    lines += ["if credential is not None:",
              "    apply_credential(credential, headers, query, cookies, HEADER_NAMES)",
              "if cookies:",
              "    headers.append(('Cookie', '; '.join(cookies)))",
              "if content_type is not None:",
              "    headers.append(('Content-Type', content_type))",
              "url = server + path",
              "if query:",
              f"    url = url + {plan.query_joiner!r} + '&'.join(query)",
              f"return OutgoingRequest({plan.method!r}, url, tuple(headers), payload, content_type)"]
    return lines
