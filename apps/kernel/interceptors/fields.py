"""The `fields` built-in: drops or masks named fields of a call's arguments and of its structured
result, and refuses (or masks) what matches a host's deny patterns.

**Rules** (`rules`: `[{"path": …, "action": "drop" | "mask"}]`) name fields with a small subset of
JSONPath, written from `$`, the value the rule applies to:

- `.name`: the key `name` of an object (letters, digits, `_` and `-`);
- `['odd key']` or `["odd key"]`: any key (`\\'`, `\\"` and `\\\\` escape inside the quotes);
- `[0]`: the element of an array at that index (from 0);
- `[*]` or `.*`: every element of an array, or every value of an object;
- `..name` or `..['odd key']`: the key at any depth below (recursive descent).

So `$.user.ssn`, `$.items[*].ssn`, `$.rows[0]`, `$..password` and `$['x-api-key']`. "drop" removes the
key (or the array element: a later element moves up), "mask" replaces the value with
`"[REDACTED:field]"`. A path that names nothing in a value leaves it as it is.

Where paths apply: on the request, to the call's `arguments` (`tools/call` and `prompts/get`; a
`resources/read` has none); on the result, to `result.structuredContent` and to each text block
whose text is a JSON object or array (`content[].text` of a tool's result, `contents[].text` of a
resource, `messages[].content.text` of a prompt, and the text of an embedded resource): MCP servers
mirror their structured content as JSON text in a text block, and a field dropped from one must not
be left in the other. A text block that is changed is re-serialized compactly.

**Deny patterns** (`deny`: Python regular expressions) are matched, together in one pass, against
the payload's JSON text (after the rules: what would go on), keys and all: a string's quotes,
backslashes and newlines are seen as JSON escapes them (`\\"`, `\\\\`, `\\n`). A match of no
characters is no match. With `deny_action` "refuse" (the default) a match refuses the call, naming
the pattern by its number (never the matched text); with "mask" each match is replaced by
`[REDACTED:deny]`, and a match that cannot be replaced without breaking the JSON (one that spans
its syntax) refuses."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import orjson

from apps.kernel.interceptors.base import PASS, Decision, Payload, Span, Subject, masked, settings_problems
from apps.kernel.interceptors.patterns import PatternSet, pattern_set
from apps.kernel.problems import FieldProblem

PHASES = ("request", "result")
DEFAULTS: Mapping[str, Any] = MappingProxyType({"rules": [], "deny": [], "deny_action": "refuse"})
SETTINGS = {
    "rules": 'the fields to drop or mask: a list of {"path": "$.a.b", "action": "drop" or "mask"}',
    "deny": "regular expressions that must not match the payload's JSON text",
    "deny_action": "refuse (the default) or mask: what a deny pattern's match does",
}
ACTIONS = ("drop", "mask")
DENY_ACTIONS = ("refuse", "mask")
MASK = "[REDACTED:field]"
MAX_RULES = 100
MAX_PATH = 500
MAX_PATTERNS = 100
MAX_PATTERN = 1000
#: The largest count a deny pattern's `{n,m}` may give.
MAX_REPEAT = 1000
#: A group holding a repeat, itself repeated: `(a+)+`, `(?:x+x+)*`, `(\w{2,})+`.
_NESTED_REPEAT = re.compile(r"(?<!\\)\((?:[^()\\]|\\.)*(?<!\\)[+*}](?:[^()\\]|\\.)*\)[+*{]")
_REPEAT_COUNTS = re.compile(r"(?<!\\)\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")

#: A key written after a dot (`$.a`, `$..a`).
_NAME = re.compile(r"[\w-]+")
#: An index in brackets.
_INDEX = re.compile(r"\[(\d+)\]")
#: How a text that may be a JSON object or array starts.
_JSON_START = re.compile(r"\s*[{\[]")


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a path: `key` (a key of an object), `index` (an element of an array), `all`
    (every element or value) or `descend` (the key `key` at any depth)."""

    kind: str
    key: str | int | None = None


class PathError(ValueError):
    """A path that is not in the subset (the words say where and why)."""


def path_parse(path: str) -> tuple[Step, ...]:
    """The steps of `path`; PathError when it is not in the subset described above."""
    if not path.startswith("$"):
        raise PathError("a path starts with $ (the value itself), as in $.a.b")
    steps: list[Step] = []
    at = 1
    while at < len(path):
        rest = path[at:]
        if rest.startswith(".."):
            at += 2
            key, at = _key_after(path, at, "..")
            if key is None:
                raise PathError(f"'..' at character {at - 1} must be followed by a key name or ['key']")
            steps.append(Step("descend", key))
        elif rest.startswith(".*"):
            steps.append(Step("all"))
            at += 2
        elif rest.startswith("."):
            at += 1
            key, at = _key_after(path, at, ".", bracket=False)
            if key is None:
                raise PathError(f"'.' at character {at} must be followed by a key name "
                                "(letters, digits, '_' or '-'); write any other key as ['key']")
            steps.append(Step("key", key))
        elif rest.startswith("[*]"):
            steps.append(Step("all"))
            at += 3
        elif (index := _INDEX.match(path, at)) is not None:
            steps.append(Step("index", int(index.group(1))))
            at = index.end()
        elif rest.startswith("['") or rest.startswith('["'):
            key, at = _quoted(path, at)
            steps.append(Step("key", key))
        elif rest.startswith("["):
            raise PathError(f"'[' at character {at + 1} must hold an index (0, 1, …), * or a quoted key "
                            "(['key']); negative indexes and slices are not supported")
        else:
            raise PathError(f"unexpected {path[at]!r} at character {at + 1}: after $ come .key, ['key'], "
                            "[0], [*] or ..key")
    if not steps:
        raise PathError("the path $ is the whole value; name a field inside it, as in $.a")
    return tuple(steps)


def _key_after(path: str, at: int, after: str, *, bracket: bool = True) -> tuple[str | None, int]:
    """The key written at `at` (a name, or a quoted key in brackets when `bracket`), and where the
    path goes on; None when there is none."""
    if bracket and path.startswith(("['", '["'), at):
        return _quoted(path, at)
    name = _NAME.match(path, at)
    if name is None:
        return None, at
    return name.group(), name.end()


def _quoted(path: str, at: int) -> tuple[str, int]:
    """The quoted key of `['…']` or `["…"]` starting at `at`, and where the path goes on."""
    quote = path[at + 1]
    key: list[str] = []
    i = at + 2
    while i < len(path):
        char = path[i]
        if char == "\\" and i + 1 < len(path) and path[i + 1] in (quote, "\\"):
            key.append(path[i + 1])
            i += 2
            continue
        if char == quote:
            if path[i + 1 : i + 2] != "]":
                raise PathError(f"the quoted key at character {at + 1} must be closed with {quote}]")
            return "".join(key), i + 2
        key.append(char)
        i += 1
    raise PathError(f"the quoted key at character {at + 1} is never closed with {quote}]")


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule, its path parsed."""

    path: str
    steps: tuple[Step, ...]
    action: str


def settings_check(settings: object) -> list[FieldProblem]:
    if problems := settings_problems(settings, SETTINGS):
        return problems
    assert isinstance(settings, Mapping)
    problems = []
    rules = settings.get("rules", DEFAULTS["rules"])
    deny = settings.get("deny", DEFAULTS["deny"])
    if not isinstance(rules, (list, tuple)):
        problems.append(FieldProblem("settings.rules", 'rules must be a list of {"path": …, "action": …}'))
    else:
        problems.extend(_rules_problems(rules))
    if not isinstance(deny, (list, tuple)):
        problems.append(FieldProblem("settings.deny", "deny must be a list of regular expressions"))
    else:
        problems.extend(_deny_problems(deny))
    if settings.get("deny_action", DEFAULTS["deny_action"]) not in DENY_ACTIONS:
        problems.append(FieldProblem("settings.deny_action", "deny_action must be refuse or mask"))
    if not problems and not rules and not deny:
        problems.append(FieldProblem("settings", "settings must have rules or deny patterns"))
    return problems


def _rules_problems(rules: list[Any] | tuple[Any, ...]) -> list[FieldProblem]:
    if len(rules) > MAX_RULES:
        return [FieldProblem("settings.rules", f"at most {MAX_RULES} rules")]
    problems = []
    for number, rule in enumerate(rules, start=1):
        if not isinstance(rule, Mapping) or set(rule) != {"path", "action"}:
            problems.append(FieldProblem("settings.rules", f'rule {number} must be {{"path": …, "action": …}}, '
                                                           "with nothing else"))
            continue
        path = rule["path"]
        if not isinstance(path, str) or not path or len(path) > MAX_PATH:
            problems.append(FieldProblem("settings.rules", f"rule {number}: path must be a JSONPath of at most "
                                                           f"{MAX_PATH} characters, as in $.a.b"))
        else:
            try:
                path_parse(path)
            except PathError as error:
                problems.append(FieldProblem("settings.rules", f"rule {number}: path {path!r}: {error}"))
        if rule["action"] not in ACTIONS:
            problems.append(FieldProblem("settings.rules", f"rule {number}: action must be drop or mask"))
    return problems


def _deny_problems(deny: list[Any] | tuple[Any, ...]) -> list[FieldProblem]:
    if len(deny) > MAX_PATTERNS:
        return [FieldProblem("settings.deny", f"at most {MAX_PATTERNS} deny patterns")]
    problems = []
    for number, pattern in enumerate(deny, start=1):
        if not isinstance(pattern, str) or not pattern:
            problems.append(FieldProblem("settings.deny", f"deny pattern {number} must be a non-empty string"))
            continue
        if len(pattern) > MAX_PATTERN:
            problems.append(FieldProblem("settings.deny", f"deny pattern {number} is longer than "
                                                          f"{MAX_PATTERN} characters"))
            continue
        try:
            compiled = re.compile(pattern)
        except re.error as error:
            problems.append(FieldProblem("settings.deny", f"deny pattern {number} is not a valid regular "
                                                          f"expression: {error}"))
            continue
        if compiled.search("") is not None:
            problems.append(FieldProblem("settings.deny", f"deny pattern {number} matches the empty string "
                                                          "(it would match everywhere); make it match something"))
        elif _NESTED_REPEAT.search(pattern):
            # `(x+)+` and its kind backtrack exponentially on a near miss; run on the event loop, one
            # such pattern would stall every call of the instance.
            problems.append(FieldProblem("settings.deny", f"deny pattern {number} repeats a group that itself "
                                                          "repeats (like (a+)+): on some texts it takes "
                                                          "exponential time; write it without the nesting"))
        elif any(int(count or 0) > MAX_REPEAT for pair in _REPEAT_COUNTS.findall(pattern) for count in pair):
            # Compiling a long counted repeat for the one-pass scan takes seconds, on every gateway.
            problems.append(FieldProblem("settings.deny", f"deny pattern {number} repeats something more than "
                                                          f"{MAX_REPEAT} times ({{n,m}}); use + or * instead"))
    return problems


class Fields:
    """A compiled `fields` interceptor."""

    def __init__(self, rules: tuple[Rule, ...], deny: PatternSet | None, deny_mask: bool) -> None:
        self._rules = rules
        self._deny = deny
        self._deny_mask = deny_mask

    def inspect(self, subject: Subject) -> Decision:
        payload = subject.payload
        findings: list[str] = []
        if self._rules:
            value = payload.value
            try:
                changed = _apply_rules(value, subject.phase, self._rules, findings)
            except RecursionError:  # deeper than Python's stack: refuse rather than pass it unchecked
                return Decision("refuse", reason=f"the {subject.phase} is nested too deeply to apply the field rules")
            if changed is not value:
                payload = Payload(value=changed)
        if self._deny is not None:
            if "\\u" in payload.text or "\\/" in payload.text:
                # Characters written as escapes are matched as the characters they are (`internal\u002ecorp`
                # is `internal.corp`): re-serialized, the text writes them as themselves.
                payload = Payload(value=payload.value)
            spans = [Span(match.start(), match.end(), name) for name, match in self._deny.matches(payload.text)
                     if match.end() > match.start()]
            if spans:
                numbers = sorted({int(span.kind) for span in spans})
                denied = tuple(f"deny:{n}" for n in numbers)
                where = "the request" if subject.phase == "request" else "the result"
                named = ", ".join(map(str, numbers))
                plural = "s" if len(numbers) > 1 else ""
                if not self._deny_mask:
                    return Decision("refuse", reason=f"deny pattern{plural} {named} matched {where}",
                                    findings=denied)
                rewritten = masked(payload, [Span(span.start, span.end, "deny") for span in spans])
                if rewritten is None:
                    return Decision("refuse", reason=f"deny pattern{plural} {named} matched {where} across its "
                                                     "JSON syntax: it cannot be masked without breaking it",
                                    findings=denied)
                payload = rewritten
                findings.extend(denied)
        if not findings:
            return PASS
        return Decision("rewrite", payload=payload, findings=tuple(findings))


def build(settings: Mapping[str, Any]) -> Fields:
    """The interceptor of checked `settings` (each deny pattern compiled once, here)."""
    rules = tuple(Rule(rule["path"], path_parse(rule["path"]), rule["action"]) for rule in settings.get("rules", ()))
    deny = settings.get("deny", ())
    patterns = pattern_set([(str(n), re.compile(p)) for n, p in enumerate(deny, start=1)]) if deny else None
    return Fields(rules, patterns, settings.get("deny_action", DEFAULTS["deny_action"]) == "mask")


# Applying rules. Every function returns its input itself when nothing changed, and a copy of what
# it changed otherwise (the input is never mutated: the pipeline and other interceptors hold it).

_DROP: Any = object()  # what an edit returns for an element or value to remove


def _apply_rules(value: Any, phase: str, rules: tuple[Rule, ...], findings: list[str]) -> Any:
    """`value` (the request's params or the JSON-RPC response) with `rules` applied where they apply;
    each rule that changed something adds `field:<path>` to `findings`, in the rules' order."""
    if not isinstance(value, dict):
        return value
    hits: set[str] = set()
    new = value
    if phase == "request":
        if "arguments" in value:
            arguments = _apply_all(value["arguments"], rules, hits)
            if arguments is not value["arguments"]:
                new = {**value, "arguments": arguments}
    elif isinstance(result := value.get("result"), dict):
        edited = result
        if "structuredContent" in result:
            structured = _apply_all(result["structuredContent"], rules, hits)
            if structured is not result["structuredContent"]:
                edited = {**edited, "structuredContent": structured}
        for key, edit in _TEXT_LISTS:
            blocks = result.get(key)
            if not isinstance(blocks, list):
                continue
            blocks_edited = [edit(block, rules, hits) for block in blocks]
            if any(a is not b for a, b in zip(blocks_edited, blocks, strict=True)):
                edited = {**edited, key: blocks_edited}
        if edited is not result:
            new = {**value, "result": edited}
    findings.extend(f"field:{rule.path}" for rule in rules if rule.path in hits)
    return new


def _apply_all(value: Any, rules: tuple[Rule, ...], hits: set[str]) -> Any:
    """`value` with each rule applied in turn; the paths of the rules that changed it added to `hits`."""
    for rule in rules:
        changed = _edit(value, rule.steps, rule.action)
        if changed is not value:
            value = changed
            hits.add(rule.path)
    return value


def _json_text(text: Any, rules: tuple[Rule, ...], hits: set[str]) -> Any:
    """A text block's text with `rules` applied, when it is a JSON object or array."""
    if not isinstance(text, str) or _JSON_START.match(text) is None:
        return text
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    changed = _apply_all(parsed, rules, hits)
    return text if changed is parsed else orjson.dumps(changed).decode()


def _content_block(block: Any, rules: tuple[Rule, ...], hits: set[str]) -> Any:
    """A tool's content block (or a prompt message's content): its text, or its embedded resource's."""
    if not isinstance(block, dict):
        return block
    if block.get("type") == "text":
        text = _json_text(block.get("text"), rules, hits)
        return block if text is block.get("text") else {**block, "text": text}
    if block.get("type") == "resource" and isinstance(block.get("resource"), dict):
        resource = _resource(block["resource"], rules, hits)
        return block if resource is block["resource"] else {**block, "resource": resource}
    return block


def _resource(block: Any, rules: tuple[Rule, ...], hits: set[str]) -> Any:
    if not isinstance(block, dict) or "text" not in block:
        return block
    text = _json_text(block["text"], rules, hits)
    return block if text is block["text"] else {**block, "text": text}


def _message(message: Any, rules: tuple[Rule, ...], hits: set[str]) -> Any:
    if not isinstance(message, dict):
        return message
    content = _content_block(message.get("content"), rules, hits)
    return message if content is message.get("content") else {**message, "content": content}


#: The lists of a result whose blocks may carry JSON text, and how each block is edited.
_TEXT_LISTS: tuple[tuple[str, Callable[[Any, tuple[Rule, ...], set[str]], Any]], ...] = (
    ("content", _content_block),  # tools/call
    ("contents", _resource),  # resources/read
    ("messages", _message),  # prompts/get
)


def _edit(node: Any, steps: tuple[Step, ...], action: str) -> Any:
    """`node` with the fields `steps` name dropped or masked."""
    step, rest = steps[0], steps[1:]
    if step.kind == "descend":
        return _descend(node, step.key, rest, action)
    if step.kind == "all":
        if isinstance(node, dict):
            return _children(node, list(node), rest, action)
        if isinstance(node, list):
            return _children(node, list(range(len(node))), rest, action)
        return node
    if step.kind == "key" and isinstance(node, dict) and step.key in node:
        return _children(node, [step.key], rest, action)
    if step.kind == "index" and isinstance(node, list) and isinstance(step.key, int) and step.key < len(node):
        return _children(node, [step.key], rest, action)
    return node


def _children(node: dict[str, Any] | list[Any], keys: list[Any], rest: tuple[Step, ...], action: str) -> Any:
    """`node` with each child at `keys` edited by `rest`, or (no steps left) dropped or masked."""
    changes: dict[Any, Any] = {}
    for key in keys:
        child = node[key]
        if rest:
            changed = _edit(child, rest, action)
        else:
            changed = _DROP if action == "drop" else MASK
            if changed == child:  # masked already: nothing to do
                continue
        if changed is not child:
            changes[key] = changed
    if not changes:
        return node
    if isinstance(node, dict):
        return {k: changes.get(k, v) for k, v in node.items() if changes.get(k) is not _DROP}
    return [changes.get(i, v) for i, v in enumerate(node) if changes.get(i) is not _DROP]


def _descend(node: Any, key: str | int | None, rest: tuple[Step, ...], action: str) -> Any:
    """`node` with the key `key`, at any depth, edited by `rest` (or dropped or masked). Deeper
    matches are edited first, so one inside a matched value is edited too when the value stays."""
    if isinstance(node, dict):
        out: dict[str, Any] | None = None
        for name, child in node.items():
            changed = _descend(child, key, rest, action)
            if changed is not child:
                if out is None:
                    out = dict(node)
                out[name] = changed
        edited = node if out is None else out
        return _children(edited, [key], rest, action) if key in edited else edited
    if isinstance(node, list):
        items: list[Any] | None = None
        for i, child in enumerate(node):
            changed = _descend(child, key, rest, action)
            if changed is not child:
                if items is None:
                    items = list(node)
                items[i] = changed
        return node if items is None else items
    return node
