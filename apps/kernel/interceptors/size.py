"""The `size` built-in: caps how large a call's result may be, in UTF-8 bytes of its JSON text (the
whole JSON-RPC response), and truncates (the default) or refuses one over the cap.

Truncating keeps the result an answer of the same shape, at most `max_bytes` long:

- its blocks (a tool's `content`, a resource's `contents`, a prompt's `messages`) are kept in
  order while they fit; the text block that does not fit whole is cut, at a character's boundary,
  and every block after it is dropped; a non-text block (an image, audio, a blob, an embedded
  resource) that does not fit is dropped, and those after it may still be kept when they fit;
- the last text kept ends with a visible marker,
  `\\n[… truncated by the gateway: showing X of Y bytes]` (X and Y: the UTF-8 bytes of text kept and
  of text there was), so the model knows it reads a part; when there is no text to end, the marker
  is a text block of its own;
- non-text blocks dropped are replaced by one text block saying how many were dropped;
- `structuredContent` is never cut (a part of it would no longer match the tool's output schema):
  when it alone keeps the result over the cap, the result is refused, and so is one whose size is
  not in its blocks at all;
- an error response over the cap has its `data` dropped and then its message cut.

A result at most `max_bytes` long passes untouched; one over it only because of its formatting
(whitespace) is re-serialized compactly."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import orjson

from apps.kernel.interceptors.base import PASS, Decision, Payload, Subject, settings_problems
from apps.kernel.problems import FieldProblem

PHASES = ("result",)
DEFAULTS: Mapping[str, Any] = MappingProxyType({"max_bytes": 100_000, "action": "truncate"})
SETTINGS = {
    "max_bytes": "the largest result passed on, in bytes of its JSON text (256 to 50,000,000)",
    "action": "truncate (the default: cut the result's text to fit) or refuse",
}
MIN_BYTES = 256
MAX_BYTES = 50_000_000
ACTIONS = ("truncate", "refuse")
#: How many cuts are tried, each tighter by what the one before went over, before one that reserves
#: the markers' room ahead.
_TRIES = 4


def settings_check(settings: object) -> list[FieldProblem]:
    if problems := settings_problems(settings, SETTINGS):
        return problems
    assert isinstance(settings, Mapping)
    problems = []
    cap = settings.get("max_bytes", DEFAULTS["max_bytes"])
    if isinstance(cap, bool) or not isinstance(cap, int) or not MIN_BYTES <= cap <= MAX_BYTES:
        problems.append(FieldProblem("settings.max_bytes", f"max_bytes must be a whole number from {MIN_BYTES} "
                                                           f"to {MAX_BYTES:,}"))
    if settings.get("action", DEFAULTS["action"]) not in ACTIONS:
        problems.append(FieldProblem("settings.action", "action must be truncate or refuse"))
    return problems


def build(settings: Mapping[str, Any]) -> Size:
    """The interceptor of checked `settings`."""
    return Size(int(settings.get("max_bytes", DEFAULTS["max_bytes"])),
                settings.get("action", DEFAULTS["action"]) == "truncate")


class Size:
    """A compiled `size` interceptor."""

    def __init__(self, max_bytes: int, truncate: bool) -> None:
        self._max = max_bytes
        self._truncate = truncate

    def inspect(self, subject: Subject) -> Decision:
        text = subject.payload.text
        # A character is at most 4 bytes of UTF-8 and at least 1: most results are decided by their
        # length alone, without encoding them.
        if len(text) * 4 <= self._max:
            return PASS
        size = len(text.encode())
        if size <= self._max:
            return PASS
        if not self._truncate:
            return self._refusal(size, "")
        value = subject.payload.value
        compact = orjson.dumps(value)
        if len(compact) <= self._max:
            return Decision("rewrite", payload=Payload(text=compact.decode(), value=value),
                            reason="re-serialized compactly to fit", findings=("compacted",))
        if isinstance(value, dict) and isinstance(value.get("result"), dict):
            return self._result(value, size)
        if isinstance(value, dict) and isinstance(value.get("error"), dict):
            return self._error(value, size)
        return self._refusal(size, ", and it is not a result that can be cut")

    def _refusal(self, size: int, why: str) -> Decision:
        return Decision("refuse", reason=f"the result is {size:,} bytes, over this host's cap of {self._max:,}{why}",
                        findings=("too-large",))

    def _result(self, value: dict[str, Any], size: int) -> Decision:
        result = value["result"]
        lists = [key for key in _LISTS if isinstance(result.get(key), list)]
        skeleton = {**value, "result": {**result, **{key: [] for key in lists}}}
        fixed = len(orjson.dumps(skeleton))
        if fixed > self._max:
            if "structuredContent" in result:
                structured = len(orjson.dumps(result["structuredContent"]))
                return self._refusal(size, f", and its structuredContent alone is {structured:,} bytes: it cannot be "
                                           "cut (a part would no longer match the tool's output schema)")
            return self._refusal(size, ", and what is over is not its text: it cannot be cut to fit")
        blocks = [_Block.of(key, item) for key in lists for item in result[key]]
        # The markers are placed once the cut is known, so their room is found by trying: a cut to
        # the whole budget, then (over it by the markers) one tighter by as much, and so on; the last
        # try reserves each marker's longest form ahead, which always fits when anything can.
        slack = 0
        for attempt in range(_TRIES + 1):
            cut = _cut(blocks, lists, self._max - fixed - slack, reserve=attempt == _TRIES)
            if cut is None:
                break
            new = {**value, "result": {**result, **cut}}
            out = orjson.dumps(new)
            if len(out) <= self._max:
                return Decision("rewrite", payload=Payload(text=out.decode(), value=new),
                                reason=f"truncated from {size:,} to {len(out):,} bytes", findings=("truncated",))
            slack += len(out) - self._max
        if "structuredContent" in result:
            return self._refusal(size, ", and its structuredContent keeps it over the cap even with its content cut "
                                       "(structuredContent cannot be cut: a part would no longer match the tool's "
                                       "output schema)")
        return self._refusal(size, ", and it cannot be cut to fit")

    def _error(self, value: dict[str, Any], size: int) -> Decision:
        error = {key: item for key, item in value["error"].items() if key != "data"}
        message = error.get("message")
        message = message if isinstance(message, str) else ""
        base = {**value, "error": {**error, "message": ""}}
        marker = _marker(len(message.encode()), len(message.encode()))
        budget = self._max - len(orjson.dumps(base)) - _escaped_length(marker)
        if budget < 0:
            return self._refusal(size, ", and what is over is not its error's message: it cannot be cut to fit")
        escaped = orjson.dumps(message)[1:-1]
        if len(escaped) > budget:
            kept = _prefix(escaped, budget)
            message = kept + _marker(len(kept.encode()), len(message.encode()))
        new = {**value, "error": {**error, "message": message}}
        out = orjson.dumps(new)
        if len(out) > self._max:  # pragma: no cover - the budget above holds the marker's longest form
            return self._refusal(size, ", and it cannot be cut to fit")
        return Decision("rewrite", payload=Payload(text=out.decode(), value=new),
                        reason=f"truncated from {size:,} to {len(out):,} bytes", findings=("truncated",))


#: The lists of a result that hold its blocks: a tool's, a resource's and a prompt's.
_LISTS = ("content", "contents", "messages")


@dataclass(frozen=True, slots=True)
class _Block:
    """One block of a result: where it is, and (a text block) its text and what surrounds it."""

    key: str  # the list it is in
    item: Any
    #: The text, for a text block; None for any other.
    text: str | None
    #: The block's JSON text length: whole, and (a text block) with its text empty.
    size: int
    bare: int

    @classmethod
    def of(cls, key: str, item: Any) -> _Block:
        size = len(orjson.dumps(item))
        text = _text_of(key, item)
        if text is None:
            return cls(key, item, None, size, size)
        return cls(key, item, text, size, len(orjson.dumps(_with_text(key, item, ""))))


def _text_of(key: str, item: Any) -> str | None:
    """The text of a text block (a tool's text content, a resource's text contents, a prompt's text
    message); None for any other block."""
    if not isinstance(item, dict):
        return None
    if key == "content" and item.get("type") == "text" and isinstance(item.get("text"), str):
        return item["text"]
    if key == "contents" and isinstance(item.get("text"), str):
        return item["text"]
    if key == "messages" and isinstance(content := item.get("content"), dict) and content.get("type") == "text":
        return content["text"] if isinstance(content.get("text"), str) else None
    return None


def _with_text(key: str, item: dict[str, Any], text: str) -> dict[str, Any]:
    if key == "messages":
        return {**item, "content": {**item["content"], "text": text}}
    return {**item, "text": text}


def _marker(shown: int, total: int) -> str:
    return f"\n[… truncated by the gateway: showing {shown:,} of {total:,} bytes]"


def _dropped_marker(count: int) -> str:
    blocks = "block" if count == 1 else "blocks"
    return f"[… {count:,} non-text {blocks} dropped by the gateway: over this host's size cap]"


def _marker_block(key: str, like: Any, text: str) -> dict[str, Any]:
    """A text block of the list `key` carrying `text` (shaped like `like`, a block of that list,
    where the list's blocks need more than a text: a resource's URI, a message's role)."""
    if key == "contents":
        uri = like.get("uri") if isinstance(like, dict) and isinstance(like.get("uri"), str) else ""
        return {"uri": uri, "mimeType": "text/plain", "text": text}
    if key == "messages":
        role = like.get("role") if isinstance(like, dict) and like.get("role") in ("user", "assistant") else "user"
        return {"role": role, "content": {"type": "text", "text": text}}
    return {"type": "text", "text": text}


def _escaped_length(text: str) -> int:
    """The bytes `text` takes inside a JSON string (quotes not counted)."""
    return len(orjson.dumps(text)) - 2


def _cut(blocks: list[_Block], lists: list[str], budget: int, *, reserve: bool) -> dict[str, list[Any]] | None:
    """The result's lists, their blocks cut to take at most `budget` bytes, markers added; with
    `reserve`, the markers' room is kept out of the budget, so all of it is at most `budget`. None
    when there is no room at all."""
    total = sum(len(block.text.encode()) for block in blocks if block.text is not None)
    others = sum(1 for block in blocks if block.text is None)
    room = budget
    if reserve:  # each marker at its longest (X = Y, every non-text block dropped, the longest URI or role)
        if total:
            room -= max(len(orjson.dumps(_marker_block(b.key, b.item, _marker(total, total)))) for b in blocks) + 1
        if others:
            room -= max(len(orjson.dumps(_marker_block(b.key, b.item, _dropped_marker(others)))) for b in blocks) + 1
    if room < 0:
        return None
    kept: dict[str, list[Any]] = {key: [] for key in lists}
    shown = 0
    dropped: list[_Block] = []
    last_text: tuple[str, int, _Block, str] | None = None  # (list, index, block, text kept)
    stopped = False
    for block in blocks:
        items = kept[block.key]
        comma = 1 if items else 0
        if not stopped and block.size + comma <= room:
            room -= block.size + comma
            items.append(block.item)
            if block.text is not None:
                shown += len(block.text.encode())
                last_text = (block.key, len(items) - 1, block, block.text)
            continue
        if block.text is None:
            dropped.append(block)
            continue
        if not stopped and (allowance := room - comma - block.bare) >= 0:
            # The text block that does not fit whole: cut it, and keep nothing after it.
            text = _prefix(orjson.dumps(block.text)[1:-1], allowance)
            room -= block.bare + comma + _escaped_length(text)
            items.append(_with_text(block.key, block.item, text))
            shown += len(text.encode())
            last_text = (block.key, len(items) - 1, block, text)
        stopped = True
    if shown < total:
        marker = _marker(shown, total)
        if last_text is not None:
            key, index, block, text = last_text
            kept[key][index] = _with_text(key, block.item, text + marker)
        else:
            first = next(b for b in blocks if b.text is not None)
            kept[first.key].append(_marker_block(first.key, first.item, marker.lstrip("\n")))
    if dropped:
        first = dropped[0]
        kept[first.key].append(_marker_block(first.key, first.item, _dropped_marker(len(dropped))))
    return kept


def _prefix(escaped: bytes, limit: int) -> str:
    """The longest start of a JSON string's escaped UTF-8 body `escaped` that is at most `limit`
    bytes and ends between characters: not inside a multi-byte character, nor inside an escape
    (`\\n`, `\\"`, `\\\\`, `\\u0001`)."""
    if len(escaped) <= limit:
        return orjson.loads(b'"' + escaped + b'"')  # type: ignore[no-any-return]
    cut = limit
    while cut > 0 and escaped[cut] & 0xC0 == 0x80:  # a UTF-8 continuation byte: inside a character
        cut -= 1
    # The escape nearest before the cut (an escape is at most 6 bytes: \uXXXX); a backslash starts
    # one when an even number of backslashes comes right before it.
    backslash = escaped.rfind(b"\\", max(0, cut - 6), cut)
    if backslash != -1:
        run = 0
        while backslash - run - 1 >= 0 and escaped[backslash - run - 1] == 0x5C:
            run += 1
        start = backslash if run % 2 == 0 else backslash - 1
        length = 6 if escaped[start + 1 : start + 2] == b"u" else 2
        if start + length > cut:
            cut = start
    return orjson.loads(b'"' + escaped[:cut] + b'"')  # type: ignore[no-any-return]
