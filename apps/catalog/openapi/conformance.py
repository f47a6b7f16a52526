"""A document checked against the rules of its OpenAPI/Swagger version, beside the compiler.

**Rules**: the JSON Schema each version publishes (2.0, 3.0, 3.1), as `openapi-spec-validator`
ships them. jsonschema-rs checks a document first and lets a valid one through (EC2's 4 MB spec
in milliseconds); only a document it finds invalid is checked again by jsonschema, whose errors
say where and why (and decide: they are the findings). ``format`` is asserted by neither.
Nothing is fetched: the metaschemas are read from the package and refer only to the JSON Schema
drafts both libraries bundle; neither may retrieve anything else (a reference they do not hold
fails instead of going to the network). The document's own ``$ref``s are not followed here (the
compiler resolves the local ones and refuses the rest). openapi-spec-validator's semantic pass is
not run: it costs more than the schema check and reports what the compiler already does
(duplicate operationIds, undeclared path parameters, numbers written as strings).

**Errors and warnings**: a finding is an *error* (the version fails) when the document lacks
what the standard requires of its skeleton — ``info`` with ``title`` and ``version``; each
operation's ``responses`` with at least one response (2.0 and 3.0; 3.1 made it optional); in
3.1, at least one of ``paths``, ``components``, ``webhooks`` — or when ``info`` or an operation's
``responses`` is not an object. Everything else is a *warning*: real specs carry unknown fields,
strings for booleans, responses without descriptions, and the compiler reads past them.

**Findings** are :class:`Problem` s with JSON pointers: a missing field at the place it belongs
(``/info/title``), an unknown field at itself. Where the standard allows several forms (a
parameter or a reference; a path, query, header or cookie parameter), the form the value is
meant as is told by its ``$ref`` and its discriminating fields (``in``, ``type``), and only that
form's findings are reported; when no form fits, one finding says so.

**Cost**: a valid document, milliseconds (EC2: 6 ms); an invalid one, about a second per four
megabytes of JSON for the findings. A document whose YAML aliases expand past :data:`MAX_NODES`
values is refused before it is walked.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .diagnostics import Diagnostics, join
from .loader import detect_version, load_document
from .model import Problem

#: Values (objects, arrays and scalars) a document may expand to; YAML aliases share objects, so a
#: small file can expand to billions, which the schema check would walk one by one.
MAX_NODES = 2_000_000
#: Findings of each severity listed; the rest are counted in one last finding.
MAX_LISTED = 100
_MAX_SHOWN = 60  # characters of a value quoted in a message
_MAX_MESSAGE = 300

# The definitions whose findings can be errors, by their names in each version's metaschema.
_KINDS = {
    "Info": "info", "info": "info", "Operation": "operation", "operation": "operation",
    "Responses": "responses", "responses": "responses",
}
_ERROR_FIELDS = {"document": frozenset({"info"}), "info": frozenset({"title", "version"}),
                 "operation": frozenset({"responses"})}
#: Left to the compiler, which refuses a 2.0 or 3.0 document without paths in its own words.
_COMPILER_REPORTS = {("document", ("paths",))}
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
               float: "a number", type(None): "null"}
_ARTICLES = {"object": "an object", "array": "an array", "string": "a string", "boolean": "a boolean",
             "integer": "an integer", "number": "a number", "null": "null"}


@dataclass(frozen=True, slots=True)
class Conformance:
    """What the rules of the document's version say of it (both empty when it could not be read:
    the compiler reports that)."""

    errors: tuple[Problem, ...] = ()
    warnings: tuple[Problem, ...] = ()


@dataclass(frozen=True, slots=True)
class _Finding:
    path: tuple[str | int, ...]
    validator: str  # the jsonschema keyword that failed
    kind: str  # "document", "info", "operation", "responses" or "" (any other object)
    #: The fields missing ("required"; "alternatives": one of them is), or the types wanted ("type").
    missing: tuple[str, ...] = ()
    error: Any = None  # the jsonschema error, for the words of any other finding


def spec_conformance(data: bytes | str, *, max_bytes: int) -> Conformance:
    """The findings of the rules of the document's version that the compiler does not report
    itself (see the module's rules). Never raises for bad input; a document that cannot be read
    or identified gives no findings."""
    quiet = Diagnostics()  # the compiler reports the same problems with the same words
    doc = load_document(data, max_bytes, quiet)
    spec_version = detect_version(doc, quiet) if doc is not None else None
    if doc is None or spec_version is None:
        return Conformance()
    if not _within(doc, MAX_NODES):
        return Conformance(errors=(Problem("", f"the document expands to more than {MAX_NODES:,} values "
                                               "(YAML aliases); it cannot be checked"),))
    checker, kinds, valid = _checker(spec_version)
    try:
        if valid(doc):
            return Conformance()
    except Exception:  # noqa: BLE001 - a value the fast check cannot take: the detailed check decides
        pass
    diag = Diagnostics()
    counts = {True: 0, False: 0}
    try:
        for error in checker.iter_errors(doc):
            for finding in _flatten(error, kinds):
                if (finding.kind, finding.missing) in _COMPILER_REPORTS:
                    continue
                is_error, pointer, message = _describe(finding, spec_version)
                counts[is_error] += 1
                if counts[is_error] <= MAX_LISTED:
                    clipped = message if len(message) <= _MAX_MESSAGE else message[:_MAX_MESSAGE - 1] + "…"
                    (diag.error if is_error else diag.warning)(pointer, clipped)
    except RecursionError:
        diag.error("", "document is nested too deeply")
    for is_error, more in ((True, counts[True] - MAX_LISTED), (False, counts[False] - MAX_LISTED)):
        if more > 0:
            (diag.error if is_error else diag.warning)("", f"… and {more:,} more finding{'s' * (more > 1)} "
                                                          f"of the {_rules(spec_version)} rules")
    return Conformance(errors=tuple(diag.errors), warnings=tuple(diag.warnings))


def _within(doc: Any, limit: int) -> bool:
    """Whether the document, aliases expanded, has at most `limit` values (iterative: any depth)."""
    stack, count = [doc], 0
    while stack:
        item = stack.pop()
        count += 1
        if count > limit:
            return False
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


@functools.cache
def _checker(version: str) -> tuple[Any, dict[int, str], Callable[[Any], bool]]:
    """The version's metaschema validator, the kinds of its definitions (by identity) and the fast
    validity check, built once."""
    import jsonschema_rs
    from jsonschema.validators import validator_for
    from jsonschema_specifications import REGISTRY
    from openapi_spec_validator.schemas import schema_v2, schema_v30, schema_v31

    metaschema = _without_unique_items(copy.deepcopy(dict({"2.0": schema_v2, "3.0": schema_v30, "3.1": schema_v31}[version])))
    definitions = metaschema.get("definitions") or metaschema.get("$defs") or {}
    kinds = {id(schema): _KINDS[name] for name, schema in definitions.items() if name in _KINDS}
    kinds[id(metaschema)] = "document"
    # REGISTRY holds the JSON Schema drafts and cannot retrieve: an unknown reference fails, offline.
    checker = validator_for(metaschema)(metaschema, registry=REGISTRY)
    fast = jsonschema_rs.validator_for(metaschema, retriever=_not_fetched, validate_formats=False)
    return checker, kinds, fast.is_valid


def _not_fetched(uri: str) -> Any:
    raise ValueError(f"{uri} is not fetched: the metaschemas refer only to bundled drafts")


def _without_unique_items(schema: Any) -> Any:
    """The metaschema without `uniqueItems: true`: jsonschema compares objects pairwise (three
    thousand parameters of an operation take 16 s), and the compiler reports duplicates itself."""
    if isinstance(schema, dict):
        if isinstance(schema.get("uniqueItems"), bool):
            del schema["uniqueItems"]
        for value in schema.values():
            _without_unique_items(value)
    elif isinstance(schema, list):
        for value in schema:
            _without_unique_items(value)
    return schema


def _relative(error: Any) -> tuple[str | int, ...]:
    return tuple(error.relative_path)


def _missing(error: Any) -> set[str]:
    """The fields a `required` error says are missing from its object."""
    if error.validator != "required" or not isinstance(error.instance, dict):
        return set()
    return {name for name in error.validator_value if isinstance(name, str) and name not in error.instance}


def _misfits(errors: list[Any]) -> int:
    """How far a value is from being meant as this form: its type is not the form's, a field the
    form fixes (`in: path` for the path parameter) has another value, or the form is a reference
    and the value has no `$ref`. Other errors are the value's defects, not another form."""
    count = 0
    for error in errors:
        depth = len(error.relative_path)
        if depth == 0 and (error.validator == "type" or "$ref" in _missing(error)):
            count += 1
        elif depth == 1 and error.validator in ("enum", "const"):
            count += 1
    return count


def _flatten(error: Any, kinds: dict[int, str], base: tuple[str | int, ...] = ()) -> Iterator[_Finding]:
    """The findings of one jsonschema error: alternatives (`oneOf`, `anyOf`) narrowed to the form
    the value is meant as, `required` split into one finding per missing field."""
    path = base + _relative(error)
    kind = kinds.get(id(error.schema), "")
    if error.validator in ("oneOf", "anyOf") and error.context:
        forms: dict[Any, list[Any]] = {}
        for sub in error.context:
            forms.setdefault(sub.relative_schema_path[0], []).append(sub)
        types = [sub.validator_value for errors in forms.values() for sub in errors
                 if sub.validator == "type" and not sub.relative_path]
        if len(types) == len(forms):  # a value of a type no form takes
            wanted = [t for value in types for t in (value if isinstance(value, list) else [value])]
            yield _Finding(path, "type", kind, tuple(dict.fromkeys(wanted)), error)
            return
        fewest = min(_misfits(errors) for errors in forms.values())
        candidates = [errors for errors in forms.values() if _misfits(errors) == fewest]
        if len(candidates) == 1:  # the form the value is meant as
            for sub in candidates[0]:
                yield from _flatten(sub, kinds, path)
            return
        lacking = [set().union(*(_missing(sub) for sub in errors if not sub.relative_path)) for errors in candidates]
        always = set.intersection(*lacking) if lacking else set()
        if always:  # whatever the form, these are missing
            yield _Finding(path, "required", _kind_of(candidates, kinds), tuple(sorted(always)))
            return
        if all(lacking) and all(all(sub.validator == "required" and not sub.relative_path for sub in errors)
                                for errors in candidates):
            # Each form only lacks its own fields: one of them is required (3.1's paths, components, webhooks).
            yield _Finding(path, "alternatives", kind, tuple(sorted(set().union(*lacking))))
            return
    if error.validator == "required":
        for name in sorted(_missing(error)):
            yield _Finding(path, "required", kind, (name,))
        return
    if error.validator == "type":
        wanted = error.validator_value
        yield _Finding(path, "type", kind, tuple(wanted if isinstance(wanted, list) else [wanted]), error)
        return
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {})
        patterns = list(error.schema.get("patternProperties", {}))
        unknown = [key for key in error.instance if key not in known and not any(re.search(p, key) for p in patterns)]
        if unknown:
            for key in unknown:
                yield _Finding((*path, key), "unknown", kind)
            return
    yield _Finding(path, error.validator, kind, error=error)


def _kind_of(forms: Iterable[list[Any]], kinds: dict[int, str]) -> str:
    found = {kinds.get(id(sub.schema), "") for errors in forms for sub in errors if not sub.relative_path}
    return found.pop() if len(found) == 1 else ""


def _describe(finding: _Finding, spec_version: str) -> tuple[bool, str, str]:
    """(is it an error, pointer, message) of a finding."""
    rules = _rules(spec_version)
    pointer = join("", *finding.path)
    if finding.validator == "required":
        name = finding.missing[0] if len(finding.missing) == 1 else None
        is_error = any(field in _ERROR_FIELDS.get(finding.kind, ()) for field in finding.missing)
        if name is not None:
            return is_error, join(pointer, name), f"the field {name!r} is missing; {rules} requires it"
        return is_error, pointer, f"the fields {_names(finding.missing)} are missing; {rules} requires them"
    if finding.validator == "alternatives":
        return finding.kind == "document", pointer, f"needs one of {_names(finding.missing, 'or')} ({rules})"
    if finding.validator == "unknown":
        return False, *_other(finding, pointer, rules)
    error = finding.error
    if finding.kind == "responses" and error.validator in ("minProperties", "not"):
        return True, pointer, f"has no response; {rules} requires at least one"
    if finding.validator == "type" and finding.kind in ("info", "responses"):
        return True, pointer, f"must be an object, not {_json_type(error.instance)} ({rules})"
    return False, *_other(finding, pointer, rules)


def _other(finding: _Finding, pointer: str, rules: str) -> tuple[str, str]:
    """Pointer and words of a warning."""
    if finding.validator == "unknown":
        return pointer, f"unknown field {finding.path[-1]!r}; {rules} does not define it here"
    error = finding.error
    value = error.instance
    if finding.validator == "type":
        return pointer, f"must be {' or '.join(_ARTICLES.get(t, str(t)) for t in finding.missing)}, not {_shown(value)} ({rules})"
    if error.validator == "enum":
        return pointer, f"must be one of {_names(error.validator_value, 'or')}, not {_shown(value)} ({rules})"
    if error.validator in ("oneOf", "anyOf"):
        if not error.context:  # oneOf: more than one form fits
            return pointer, f"fits more than one of the forms {rules} allows here"
        return pointer, f"matches none of the forms {rules} allows here"
    return pointer, f"{error.message} ({rules})"


def _rules(spec_version: str) -> str:
    return "Swagger 2.0" if spec_version == "2.0" else f"OpenAPI {spec_version}"


def _names(names: Iterable[Any], word: str = "and") -> str:
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + f" {word} {quoted[-1]}"


def _json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _shown(value: Any) -> str:
    """`a string ('false')`: the value's type, and the value itself when it is short and scalar."""
    if isinstance(value, (dict, list)) or value is None:
        return _json_type(value)
    text = repr(value)
    return f"{_json_type(value)} ({text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN - 1] + '…'})"
