"""The list operations of a virtual host with several backends (docs/virtual-hosts.md, "Lists"): ask every
backend at once, follow each one's pages to the end, merge into one deterministic list, and hand it
out downstream in pages behind signed cursors (`cursors.py`). Pages are cut to `PageLimits`, as is
every list the gateway hands out (`local.py`, `list_pieces.py`).

Pure: no I/O of its own. Callers pass the fetching as callables and log what is reported back.
"""

from __future__ import annotations

import asyncio
import hashlib
from bisect import bisect_left, bisect_right
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from apps.gateway.pipeline.cursors import CursorCodec, ListScope, stale_cursor
from apps.gateway.pipeline.ports import ResponseTooLarge
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.errors import InvalidParams

X = TypeVar("X")
R = TypeVar("R")

#: List method -> kind, which is also the result's list field and the cursor's list kind.
LIST_METHODS: Mapping[str, str] = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}
#: The field that identifies an item of each kind: the sort key, and what must be unique. A
#: resource is what `resources/read` takes, its URI; its `name` is only a label.
IDENTITY: Mapping[str, str] = {"tools": "name", "prompts": "name", "resources": "uri", "resourceTemplates": "name",
                                "tasks": "taskId"}


@dataclass(frozen=True, slots=True)
class Dropped:
    """An item left out of a merged list: a duplicate of an identity `kept_from` another (or the
    same) backend already supplied, or an item without a string identity (`kept_from` None)."""

    map_key: str
    identity: str | None
    kept_from: str | None

    @property
    def reason(self) -> str:
        if self.identity is None:
            return "no identifying field"
        return f"duplicate of {self.identity!r} from backend {self.kept_from!r}"


@dataclass(frozen=True, slots=True)
class MergedList:
    """One list of a virtual host, in its downstream order. `identities[i]` and `origins[i]` (map
    key) belong to `items[i]`; `version` fingerprints the identities in order (cursors bind to it)."""

    kind: str
    items: tuple[Mapping[str, Any], ...]
    identities: tuple[str, ...]
    origins: tuple[str, ...]
    version: bytes
    dropped: tuple[Dropped, ...] = ()


def merge_lists(kind: str, per_backend: Mapping[str, Sequence[Mapping[str, Any]]]) -> MergedList:
    """Merge each backend's complete list (items already carrying their exposed names) into one.

    Order: by identity (`IDENTITY[kind]`: name, or URI for resources), compared by code point — the
    same on every instance and independent of the order backends answered in. Duplicate identities
    keep the item of the first map key in sorted order (within one backend, its first occurrence);
    the rest are reported in `dropped`, as are items without a string identity."""
    field_name = IDENTITY[kind]
    # Backends in map key order, each in its own order: the first occurrence of an identity wins.
    chosen: dict[str, tuple[str, Mapping[str, Any]]] = {}
    dropped: list[Dropped] = []
    for map_key in sorted(per_backend):
        for item in per_backend[map_key]:
            identity = item.get(field_name) if type(item) is dict or isinstance(item, Mapping) else None
            if not isinstance(identity, str):
                dropped.append(Dropped(map_key, None, None))
            elif identity in chosen:
                dropped.append(Dropped(map_key, identity, chosen[identity][0]))
            else:
                chosen[identity] = (map_key, item)
    identities = sorted(chosen)  # identities are unique now, so no tie-break is needed
    entries = [chosen[identity] for identity in identities]
    return MergedList(
        kind,
        items=tuple(item for _, item in entries),
        identities=tuple(identities),
        origins=tuple(map_key for map_key, _ in entries),
        version=list_version(identities),
        dropped=tuple(dropped),
    )


def as_listed(kind: str, items: Sequence[Mapping[str, Any]], map_key: str = "") -> MergedList:
    """One backend's list in its own order, to be paged as it is (a tool server's tools, which
    have unique names)."""
    field_name = IDENTITY[kind]
    identities = tuple(str(item.get(field_name, "")) for item in items)
    return MergedList(kind, tuple(items), identities, (map_key,) * len(identities), list_version(identities))


def without(merged: MergedList, identity: str) -> MergedList:
    """The list without the item `identity` (the same list when it holds none)."""
    at = bisect_left(merged.identities, identity)
    if at == len(merged.identities) or merged.identities[at] != identity:
        return merged
    identities = merged.identities[:at] + merged.identities[at + 1:]
    return MergedList(
        merged.kind, merged.items[:at] + merged.items[at + 1:], identities, merged.origins[:at] + merged.origins[at + 1:],
        list_version(identities), merged.dropped,
    )


def list_version(identities: Sequence[str]) -> bytes:
    """8 bytes that change whenever an item is added, removed or renamed (not when it is edited)."""
    return hashlib.blake2b("\x00".join(identities).encode(), digest_size=8).digest()


#: Bytes of a list response that are not its entries — the JSON-RPC envelope, an id, `nextCursor`
#: (at most 1,024 characters), `ttlMs` and `cacheScope` — kept free of `PageLimits.bytes`.
ENVELOPE_BYTES = 2048


@dataclass(frozen=True, slots=True)
class PageLimits:
    """How big one page of a list the gateway hands out may be: at most `items` entries, and a whole
    response of at most `bytes` bytes — under the 1 MiB a client's SSE reader takes in one event —
    unless one entry alone is bigger (it is then a page by itself: entries are never cut)."""

    items: int = 1000
    bytes: int = 1_000_000

    def __post_init__(self) -> None:
        if self.items < 1:
            raise ValueError("a page holds at least one item")
        if self.bytes < 2 * ENVELOPE_BYTES:
            raise ValueError(f"a page is at least {2 * ENVELOPE_BYTES} bytes")


def encode_page(
    items: Sequence[Any], start: int, limits: PageLimits, *, lead: Sequence[Any] = (), reserved: int = 0,
) -> tuple[bytes, int]:
    """The page of `items` from `start` on as one encoded JSON array, and where the next page
    starts (`len(items)`: this page reaches the end). The page holds `lead` first (entries that are
    not in `items`, such as a host's own tool), then as many of `items` as keep it within
    `limits.items` entries and `limits.bytes` less `ENVELOPE_BYTES` and the `reserved` bytes the rest
    of the response takes; at least one, however big."""
    budget = limits.bytes - ENVELOPE_BYTES - reserved
    parts = [jsonrpc.dumps(entry) for entry in lead]
    used = 2 + sum(len(part) + 1 for part in parts)
    end = start
    for item in items[start : start + max(limits.items - len(parts), 1)]:
        encoded = jsonrpc.dumps(item)
        if end > start and used + len(encoded) + 1 > budget:
            break
        parts.append(encoded)
        used += len(encoded) + 1
        end += 1
    return b"[" + b",".join(parts) + b"]", end


def start_of(
    cursor: object, merged: MergedList, codec: CursorCodec, tenant_id: int, vhost: str, *, resume_stale: bool = False
) -> int:
    """Where the page a request asks for starts: 0 without a cursor, else the cursor's position.
    Raises InvalidParams for a refused cursor, including a stale one unless `resume_stale`, which
    resumes after the last key the cursor carries (docs/virtual-hosts.md, `cursors.py`)."""
    if cursor is None:
        return 0
    position = codec.decode(cursor, ListScope(merged.kind, tenant_id, vhost, merged.version), allow_stale=resume_stale)
    if position.stale:
        if position.last is None:
            raise stale_cursor(merged.kind)
        return bisect_right(merged.identities, position.last)
    offset = position.offset
    # Same version, so the offset is exact; the last key guards against a fingerprint collision.
    if offset > len(merged.items) or (
        position.last is not None and (offset == 0 or merged.identities[offset - 1] != position.last)
    ):
        raise InvalidParams(
            f"Invalid params: cursor does not fit the {merged.kind} list; list again without a cursor",
            data={"cursor": "stale"},
        )
    return offset


#: The page of a list from a start: what goes in the result's list field, and where the next starts.
Pages = Callable[[int], tuple[Any, int]]


def list_result(
    merged: MergedList,
    cursor: object,
    *,
    codec: CursorCodec,
    tenant_id: int,
    vhost: str,
    pages: Pages,
    resume_stale: bool = False,
) -> dict[str, Any]:
    """The MCP result for one page, e.g. `{"tools": [...], "nextCursor": "..."}` (no `nextCursor` on
    the last page). `pages(start)` cuts the page (`encode_page`, and a caller may keep what it
    cut). Raises InvalidParams for a refused cursor (see `start_of`)."""
    start = start_of(cursor, merged, codec, tenant_id, vhost, resume_stale=resume_stale)
    entries, next_start = pages(start)
    result: dict[str, Any] = {merged.kind: entries}
    if next_start < len(merged.items):
        scope = ListScope(merged.kind, tenant_id, vhost, merged.version)
        result["nextCursor"] = codec.encode(scope, next_start, merged.identities[next_start - 1])
    return result


def paged(merged: MergedList, limits: PageLimits) -> Pages:
    """`list_result`'s pages of `merged` under `limits`, each encoded when asked for."""
    return lambda start: _fragment(encode_page(merged.items, start, limits))


def _fragment(page: tuple[bytes, int]) -> tuple[Any, int]:
    return jsonrpc.encoded(page[0]), page[1]


class PaginationError(Exception):
    """A backend's list cannot be followed to its end: a malformed page, a cursor it already gave
    (a loop), or more pages than allowed. The caller logs it and omits the backend."""


class ListTooLarge(PaginationError):
    """A backend's list is over one of its caps (`ListCaps`); reading stopped there, and what was
    read of it is dropped: a backend is left out rather than listed in part."""


@dataclass(frozen=True, slots=True)
class ListCaps:
    """How much of one backend's list the gateway takes in: at most `max_items` entries and
    `max_bytes` bytes of responses across all its pages (None: no cap), in `max_pages` pages."""

    max_items: int | None = None
    max_bytes: int | None = None
    max_pages: int = 100


#: One fetched page: its result, and how many bytes its response took.
Page = tuple[Mapping[str, Any], int]


async def collect_all_pages(
    fetch_page: Callable[[str | None, int | None], Awaitable[Page]], key: str, caps: ListCaps = ListCaps()
) -> list[Any]:
    """Every item of an upstream list: `fetch_page(None, allowance)`, then `fetch_page(nextCursor,
    allowance)` while a page carries a non-empty `nextCursor`. `allowance` is how many bytes the
    page may still take (None: no cap); a fetch whose response is over it raises ResponseTooLarge
    before reading it all. `key` is the result's list field (`tools`, ...). Raises ListTooLarge past
    a cap, PaginationError for a list that cannot be followed (and whatever `fetch_page` raises)."""
    items: list[Any] = []
    seen: set[str] = set()
    cursor: str | None = None
    used = 0
    for number in range(1, caps.max_pages + 1):
        allowance = None if caps.max_bytes is None else caps.max_bytes - used
        try:
            result, size = await fetch_page(cursor, allowance)
        except ResponseTooLarge as exc:
            if allowance is None or exc.limit < allowance:
                raise  # over the cap of any one response, not this list's
            raise ListTooLarge(f"the {key} list is over {caps.max_bytes:,} bytes, the gateway's limit per backend "
                               f"(reached on page {number})") from None
        used += size
        entries = result.get(key) if isinstance(result, Mapping) else None
        if not isinstance(entries, list):
            raise PaginationError(f"page {number} has no {key!r} list")
        if caps.max_items is not None and len(items) + len(entries) > caps.max_items:
            raise ListTooLarge(f"the {key} list has more than {caps.max_items:,} entries, the gateway's limit per "
                               f"backend (reached on page {number})")
        items.extend(entries)
        next_cursor = result.get("nextCursor")
        # Absent, null and "" all end the list, as in the official SDKs' `while (cursor)` loops.
        if next_cursor is None or next_cursor == "":
            return items
        if not isinstance(next_cursor, str):
            raise PaginationError(f"page {number} has a nextCursor that is not a string")
        if next_cursor in seen:
            raise PaginationError(f"page {number} repeats an earlier cursor (a pagination loop)")
        seen.add(next_cursor)
        cursor = next_cursor
    raise PaginationError(f"list has more than {caps.max_pages} pages")


async def fan_out(
    backends: Mapping[str, X], fetch: Callable[[str, X], Awaitable[R]], timeout: float
) -> tuple[dict[str, R], dict[str, str]]:
    """`fetch(map_key, backend)` for every backend at once. Returns the results of those that
    finished within `timeout` seconds, and for the others (map key -> reason) why they are omitted:
    a timeout (the fetch is cancelled) or the exception they raised. One backend's failure never
    fails the whole; if the caller is cancelled, so are all fetches."""
    tasks = {map_key: asyncio.ensure_future(fetch(map_key, backend)) for map_key, backend in backends.items()}
    results: dict[str, R] = {}
    omitted: dict[str, str] = {}
    if not tasks:
        return results, omitted
    try:
        _, pending = await asyncio.wait(tasks.values(), timeout=timeout)
    finally:
        stragglers = [task for task in tasks.values() if not task.done()]
        for task in stragglers:
            task.cancel()
        # Let the cancelled fetches unwind (close connections) before the caller goes on.
        await asyncio.gather(*stragglers, return_exceptions=True)
    for map_key, task in tasks.items():
        if task in pending:
            omitted[map_key] = f"no answer within {timeout:g} s"
        elif task.cancelled():
            omitted[map_key] = "cancelled"
        elif (error := task.exception()) is not None:
            omitted[map_key] = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        else:
            results[map_key] = task.result()
    return results, omitted
