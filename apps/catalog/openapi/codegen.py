"""Per-tool request builders: Python source written from a tool's :class:`~.invoke.Plan` and compiled once.

The generic builder (``invoke._build_generic``) walks the plan's entries on every call and dispatches on
each entry's location and value type; for a 100-argument tool that loop, a call per encoded value and the
attribute look-ups are most of the cost. The generated builder does the same steps as straight-line code,
one block per argument in the plan's order, with the location, style, names and literals fixed in the
source. It handles the common value types itself (``str``, ``int``, a ``list``; the percent-encoding memo
is read without a call) and hands any other value to the very serialiser the generic builder uses, so
both build the same request and raise the same error first; ``tests/catalog/openapi/test_codegen.py``
checks that on every tool of several real specs. ``build_request`` keeps the generic walk for arguments
that are not a plain ``dict`` (the generated code counts on dict behaviour) and for hand-made tools with
a repeated argument name.

Each argument keeps small bounded memos of its own for common values: the ``name=value`` query or cookie
entry of a text or integer and the header pair of one (``Q<i>``), the whole query entry of a list of text
(``L<i>``) and the ``name[key]=value`` of a deepObject item (``K<i>``). Unknown arguments are told by
counting the ones not seen given (the set test runs only when the count does not settle it), and a
bearer credential is added inline.

The price is paid once per tool and process, when the plan is made: ``compile()`` of the source, about
0.4 ms per argument on the 2-core sandbox (≈ 40 ms for the 100-argument benchmark tool, a few ms for a
typical tool), and a few KiB of code per argument while the plan is cached, plus its memos (at most 64
entries of up to 256 characters per argument).

Every text taken from the spec (argument and parameter names, path literals, server, content type)
enters the source through ``repr()``, which always yields a Python literal of the same string: a spec
cannot inject code. Per-argument serialisers and shared helpers are passed in the globals of the
compiled code, never as source.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from .encoding import (
    credential_apply,
    encode,
    encode_cookie,
    encode_cookie_memo,
    encode_memo,
    encode_reserved,
    encode_reserved_memo,
    json_bytes,
    missing_arguments_error,
    object_body,
    segment_guard,
    server_url,
    unknown_arguments_error,
    value_text,
    whole_body,
)
from .model import ArgumentBinding
from .outgoing import BAD_HEADER, MISSING, ArgumentError, Credential, OutgoingRequest

if TYPE_CHECKING:
    from .invoke import Plan, PlanEntry

#: ``(arguments, base_url, credential, boundary) -> request``
Builder = Callable[[Mapping[str, Any], str | None, Credential | None, str | None], OutgoingRequest]


def _remember(memo: dict[str, tuple[int, str]], key: str, count: int, entry: str) -> None:
    """Keep ``entry`` (a list's query entry) under ``key`` (its items joined by U+001F) in a bounded memo,
    when the key is short and its items hold no U+001F (``count`` is the separators plus one)."""
    if len(key) <= _ENTRY_MEMO_MAX_LENGTH and key.count("\x1f") == count - 1:
        if len(memo) >= _ENTRY_MEMO_MAX_ENTRIES:
            memo.clear()
        memo[key] = (count, entry)


def _scalar(memo: dict[str | int, str], value: str | int, prefix: str, encode: Callable[[str], str]) -> str:
    """``prefix`` and the text (percent-encoded) or integer ``value``, kept under ``value`` in a bounded
    memo when short."""
    entry = prefix + (encode(value) if type(value) is str else str(value))  # type: ignore[arg-type]
    if len(entry) <= _ENTRY_MEMO_MAX_LENGTH:
        if len(memo) >= _ENTRY_MEMO_MAX_ENTRIES:
            memo.clear()
        memo[value] = entry
    return entry


def _header(memo: dict[str | int, tuple[str, str]], value: str | int, name: str, message: str) -> tuple[str, str]:
    """The header ``(name, value)`` of a text or integer ``value``, kept under ``value`` in a bounded memo
    when short; ArgumentError(``message``) for text with CR, LF or NUL."""
    if type(value) is str:
        # Printable text has no CR, LF or NUL; the pattern decides for the rest.
        if not value.isprintable() and BAD_HEADER(value):
            raise ArgumentError(message)
        pair = (name, value)
    else:
        pair = (name, str(value))
    if len(pair[1]) <= _ENTRY_MEMO_MAX_LENGTH:
        if len(memo) >= _ENTRY_MEMO_MAX_ENTRIES:
            memo.clear()
        memo[value] = pair
    return pair


def _keyed(memo: dict[tuple[str, str | int], str], key: str, value: str | int, opening: str, closing: str,
           encode: Callable[[str], str]) -> str:
    """The ``name[key]=value`` of a deepObject item with a text key and a text or integer value (``opening``
    and ``closing`` are encoded already), kept under ``(key, value)`` in a bounded memo when short (text
    and integers never compare equal, and no other type gets in)."""
    entry = opening + encode(key) + closing + (encode(value) if type(value) is str else str(value))  # type: ignore[arg-type]
    if len(entry) <= _ENTRY_MEMO_MAX_LENGTH:
        if len(memo) >= _ENTRY_MEMO_MAX_ENTRIES:
            memo.clear()
        memo[key, value] = entry
    return entry


#: Bounds of the per-argument memos (``Q<i>``, ``L<i>``, ``K<i>``): a parameter's values seldom vary
#: much, and a plan lives as long as its tool is cached.
_ENTRY_MEMO_MAX_LENGTH = 256
_ENTRY_MEMO_MAX_ENTRIES = 64


#: The fields OutgoingRequest's __init__ sets: the generated builders set them the same way (with
#: object.__setattr__, past the frozen class's own), which holds while the class has no other fields and
#: no __post_init__ (checked here, at import).
_INIT_FIELDS = ("method", "url", "headers", "body", "content_type")
if tuple(f.name for f in fields(OutgoingRequest)) != _INIT_FIELDS or hasattr(OutgoingRequest, "__post_init__"):
    raise TypeError("OutgoingRequest changed: update the request construction in codegen._tail")

#: Globals every generated builder sees; ``f<i>`` (the generic serialiser of entry ``i``) and the
#: per-tool constants listed in :func:`generate_source` are added per tool.
_RUNTIME: dict[str, Any] = {
    "M": MISSING,
    "OutgoingRequest": OutgoingRequest,
    "new_request": object.__new__,
    "init_field": object.__setattr__,
    "ArgumentError": ArgumentError,
    "text": value_text,
    "guard": segment_guard,
    "dumps": json_bytes,
    "encode_object": object_body,
    "encode_whole": whole_body,
    "server_url": server_url,
    "apply_credential": credential_apply,
    "unknown_arguments": unknown_arguments_error,
    "missing_arguments": missing_arguments_error,
    "remember": _remember,
    "keyed": _keyed,
    "scalar": _scalar,
    "header": _header,
    # Percent-encoders and their memo look-ups: (encoder, memo get) per safe set.
    "E": encode, "EG": encode_memo,
    "R": encode_reserved, "RG": encode_reserved_memo,
    "C": encode_cookie, "CG": encode_cookie_memo,
}
_ENCODER_NAMES = {encode: ("E", "EG"), encode_reserved: ("R", "RG"), encode_cookie: ("C", "CG")}
_DELIMITERS = {"spaceDelimited": "%20", "pipeDelimited": "%7C", "tabDelimited": "%09"}


def generate(plan: Plan, bindings: Sequence[ArgumentBinding], label: str = "tool") -> Builder:
    """Compile the builder of ``plan`` (``bindings`` are the tool's, in the plan's entry order).

    The argument names must be unique, as the compiler makes them: the builder counts the arguments it
    did not see given, and when the others are all of ``arguments`` none is unknown; only otherwise does
    it test ``KNOWN.issuperset(arguments)``."""
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
           "    skipped = 0",
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
        block = _entry_block(i, entry, binding)
        if any(f"L{i}(" in line for line in block):
            namespace[f"L{i}"] = {}.get  # the entry's list memo (see _list_query)
        if any(f"Q{i}(" in line for line in block):
            namespace[f"Q{i}"] = {}.get  # the entry's text and integer memo (see _scalar, _header)
        if any(f"K{i}(" in line for line in block):
            namespace[f"K{i}"] = {}.get  # the entry's deepObject item memo (see _keyed)
        out += _indent(block, 1)
    out += _indent(_tail(plan, filled), 1)
    return "\n".join(out) + "\n", namespace


def _indent(lines: list[str], depth: int) -> list[str]:
    pad = "    " * depth
    return [pad + line for line in lines]


def _encoded(encoder: Callable[[str], str], var: str) -> str:
    """Expression: ``var`` (a ``str``) percent-encoded; the memo first, the encoder on a miss."""
    enc, memo = _ENCODER_NAMES[encoder]
    return f"({memo}({var}) or {enc}({var}))"


def _entry_block(i: int, entry: PlanEntry, binding: ArgumentBinding) -> list[str]:
    argument = repr(entry.argument)
    # ``get`` without a default: None is both "absent" and "null"; only a body argument asks which.
    # ``skipped`` counts the arguments not seen as given (see _tail); a null parameter is one of them.
    lines = [f"v = get({argument})", "if v is not None:"]
    if binding.location == "body":
        target = "whole" if entry.name is None else f"body[{entry.name!r}]"
        lines += [f"    {target} = v", f"elif {argument} in arguments:", f"    {target} = None"]  # sends null
        if binding.required:  # null or absent
            lines += [f"    missing.append({argument})", "else:", f"    missing.append({argument})"]
        else:
            lines.append("else:")
        return [*lines, "    skipped += 1"]
    lines += _indent(_serialise(i, entry, binding), 1)
    lines.append("else:")
    if binding.required:  # a null parameter is absent
        lines.append(f"    missing.append({argument})")
    return [*lines, "    skipped += 1"]


def _serialise(i: int, entry: PlanEntry, binding: ArgumentBinding) -> list[str]:
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
                "if t is str or t is int:",  # the (name, value) pair, memoised (``Q<i>``, see _header)
                f"    add_header(Q{i}(v) or header(Q{i}.__self__, v, {entry.name!r}, {message!r}))",
                "else:",
                f"    add_header(({entry.name!r}, {fn}(v)))"]
    out, add = ("query", "add_query") if location == "query" else ("cookies", "add_cookie")
    if not entry.fast:
        return [f"{fn}(v, {out})"]
    prefix = repr(entry.prefix)
    enc, memo = _ENCODER_NAMES[entry.enc]
    # Every style renders a string or an integer as ``name=value`` (digits and "-" need no encoding); the
    # entry is memoised per argument (``Q<i>``, see _scalar: text and integer keys never compare equal).
    lines = ["t = type(v)",
             "if t is str or t is int:",
             f"    {add}(Q{i}(v) or scalar(Q{i}.__self__, v, {prefix}, {enc}))"]
    style = binding.style or "form"
    exploded = style == "deepObject" or bool(binding.explode)  # deepObject repeats the name per item, too
    if location == "query":
        # A list whose items the percent-encoding memo knows (so they are text) is joined in one C-level
        # pass; any other item makes ``join`` raise TypeError (None for a miss, or unhashable), and then
        # the serialiser takes the list. Exploded, the items go in as one "name=a&name=b" entry: the same
        # URL, and the api_key_query credential drops all of them or none, as it would one by one (they
        # share the "name=" prefix, and an encoded name holds no "=" or "&").
        delimiter = '&' + entry.prefix if exploded else _DELIMITERS.get(style, ",")
        block = _list_query(i, f"{prefix} + {delimiter!r}.join(map({memo}, v))", add, f"{fn}(v, {out})")
        lines += ["elif t is list:", *(["    if v:", *_indent(block, 2)] if exploded else _indent(block, 1))]
    else:  # cookies: the api_key_cookie credential weighs each "name=value" pair by itself
        item = f"{_encoded(entry.enc, 'x')} if type(x) is str else {enc}(text(x))"
        if exploded:
            lines += ["elif t is list:", "    for x in v:", f"        {add}({prefix} + ({item}))"]
        else:
            delimiter = repr(_DELIMITERS.get(style, ","))
            lines += ["elif t is list:", f"    {add}({prefix} + {delimiter}.join([{item} for x in v]))"]
    if style == "deepObject":
        # One level of an object inline: ``name[key]=value`` percent-encoded is the encoded ``name[``, key
        # and ``]=`` joined (the encoding goes character by character); each item is memoised (``K<i>``,
        # see _keyed). Non-text keys and values other than text and integers go through the
        # serialiser's recursion with the key path built so far.
        opening = repr(entry.enc((entry.name or entry.argument) + "["))
        closing = repr(entry.enc("]") + "=")
        lines += ["elif t is dict:",
                  "    for k, x in v.items():",
                  "        u = type(x)",
                  "        if type(k) is str and (u is str or u is int):",
                  f"            {add}(K{i}((k, x)) or keyed(K{i}.__self__, k, x, {opening}, {closing}, {enc}))",
                  "        else:",
                  f"            {fn}(x, {out}, {(entry.name or entry.argument) + '['!r} + f'{{k}}]')"]
    return lines + ["else:", f"    {fn}(v, {out})"]


def _list_query(i: int, joined: str, add: str, fallback: str) -> list[str]:
    """Lines adding the query entry of the list ``v`` (its items percent-encoded by the memo and ``joined``).

    The whole entry is memoised per argument under its items joined by U+001F (the join raises TypeError
    for an item that is not text, and the serialiser takes the list), with the item count: a count equal
    to the key's separators plus one means no item holds a U+001F, so the key tells the items apart. On a
    miss the items go through the percent-encoding memo as one C-level pass (any item it does not know
    makes ``join`` raise TypeError, and then the serialiser takes the list) and the entry is remembered."""
    return ["try:",
            "    j = '\\x1f'.join(v)",
            "except TypeError:",
            f"    {fallback}",
            "else:",
            f"    h = L{i}(j)",
            "    if h is not None and h[0] == len(v):",
            f"        {add}(h[1])",
            "    else:",
            "        try:",
            f"            h = {joined}",
            "        except TypeError:",
            f"            {fallback}",
            "        else:",
            f"            {add}(h)",
            f"            remember(L{i}.__self__, j, len(v), h)"]


def _path(i: int, entry: PlanEntry, binding: ArgumentBinding) -> list[str]:
    fn = f"f{i}"
    if entry.slot < 0:  # no placeholder to fill: the generic builder does not render it either
        return ["pass"]
    target = f"s{entry.slot}"
    if binding.content_type is not None or binding.style in ("label", "matrix"):
        return [f"{target} = {fn}(v)"]
    name = repr(entry.name or entry.argument)
    return ["t = type(v)",
            "if t is str:",
            f"    {target} = {_encoded(encode, 'v')}",
            f"    if {target} in ('', '.', '..'):",
            f"        {target} = guard({target}, {name})",
            "elif t is int:",
            f"    {target} = str(v)",
            "else:",
            f"    {target} = {fn}(v)"]


def _tail(plan: Plan, filled: list[int]) -> list[str]:
    # The arguments seen as given are known and distinct (argument names are unique, see generate): when
    # they are all there is, no argument is unknown, and the set test is left out.
    lines = [f"if len(arguments) != {len(plan.arguments)} - skipped and not KNOWN.issuperset(arguments):",
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
    lines.append("if credential is not None:")
    if "authorization" not in plan.header_names:  # what apply_credential does for a bearer token then
        lines += ["    if credential.kind == 'bearer':",
                  "        headers.append(('Authorization', f'Bearer {credential.value}'))",
                  "    else:",
                  "        apply_credential(credential, headers, query, cookies, HEADER_NAMES)"]
    else:
        lines.append("    apply_credential(credential, headers, query, cookies, HEADER_NAMES)")
    lines += ["if cookies:",
              "    headers.append(('Cookie', '; '.join(cookies)))",
              "if content_type is not None:",
              "    headers.append(('Content-Type', content_type))",
              "url = server + path",
              "if query:",
              f"    url = url + {plan.query_joiner!r} + '&'.join(query)",
              # What the frozen dataclass's __init__ does, minus the call (see _INIT_FIELDS).
              "request = new_request(OutgoingRequest)",
              f"init_field(request, 'method', {plan.method!r})",
              "init_field(request, 'url', url)",
              "init_field(request, 'headers', tuple(headers))",
              "init_field(request, 'body', payload)",
              "init_field(request, 'content_type', content_type)",
              "return request"]
    return lines
