"""Searching the tool index: dense (cosine over the stored embeddings) and full-text (BM25F over
PostgreSQL's `tsvector`s, `bm25.py`) candidates, fused (`fusion.py`; docs/tool-search.md, "How a
search runs").

Both rank in process, over a tenant's index read once per index version (`IndexFacts`), and
exactly: an approximate nearest-neighbour walk (pgvector's HNSW) missed some of the nearest tools,
more of them the fewer it was asked for. The caller's view of the catalog (`SearchScope`) is a
condition of each path, never a filter over its results: a top-k taken before filtering would
come back short, or empty, for a caller who may see few tools."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import zip_longest
from typing import TYPE_CHECKING

import numpy as np
import redis
from django.db import connection
from django.db.models import BinaryField, F, Func

from apps.catalog.models import Backend, VirtualHost
from apps.catalog.selectors import virtual_host_naming_get
from apps.common.redis import redis_client
from apps.retrieval.bm25 import TextIndex, tsvector_terms
from apps.retrieval.chains import prerequisites_get
from apps.retrieval.embeddings import DIMENSIONS, embedder
from apps.retrieval.fusion import ALSO_WEIGHT, fuse, fuse_also
from apps.retrieval.indexing import index_version_key
from apps.retrieval.models import IndexedTool
from apps.retrieval.rewrite import Rewrite, ToolFacts, Vocabulary
from apps.retrieval.text import split_identifiers
from apps.tenants.models import Tenant

if TYPE_CHECKING:
    from numpy.typing import NDArray

#: Candidates each path contributes to the fusion, at least; more for a larger k.
MIN_DEPTH = 50

DENSE, TEXT, REWRITE = "dense", "text", "rewrite"
PATHS = (DENSE, TEXT, REWRITE)


@dataclass(frozen=True, slots=True)
class SearchScope:
    """The tools a caller may find: every tool of `backends`, and of each backend in `restricted`
    only the names listed."""

    backends: tuple[int, ...] = ()
    restricted: tuple[tuple[int, tuple[str, ...]], ...] = ()

    def mask(self, text: TextIndex[tuple[int, str]], backend_of: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Which of `text`'s tools the scope holds (`backend_of`: each one's backend id)."""
        allowed = np.isin(backend_of, np.asarray(self.backends, dtype=np.int64))
        for backend_id, names in self.restricted:
            allowed |= text.mask((backend_id, name) for name in names)
        return allowed


@dataclass(frozen=True, slots=True)
class SearchHit:
    backend_id: int
    name: str
    score: float  # fused
    ranks: dict[str, int] = field(default_factory=dict)  # path → rank (1-based), for the paths that found it
    scores: dict[str, float] = field(default_factory=dict)  # path → its own score (cosine similarity, BM25)


def tool_index_search(
    *,
    tenant_id: int,
    scope: SearchScope,
    query: str,
    k: int,
    also: Sequence[str] = (),
    paths: tuple[str, ...] = PATHS,
    rewrite_ids: bool = True,
    also_weight: float = ALSO_WEIGHT,
) -> list[SearchHit]:
    """The best `k` tools of `scope` for `query`, best first. Deterministic for a given index.
    `paths`: the retrieval paths to fuse (one alone ranks as that path does), and `rewrite_ids`:
    whether to read ids as below (both for comparisons).

    Ids and ARNs in the query are read as the resource types they name (`rewrite.py`): the dense
    and full-text paths see the type's words in their place, and when the query says little else
    a third path ranks the tools that describe those types.

    `also`: other phrasings or keywords of the same need (the calling agent's), each searched as
    the query is and fused after it (`fusion.fuse_also`, each counting `also_weight`): the query's
    own first hits stay in the first five. A hit's `ranks` and `scores` stay the query's paths'
    (a tool only the alternatives found has none); its `score` is the joined fusion's."""
    found = _rankings(tenant_id, scope, [query, *_alternatives(query, also)], k, paths, rewrite_ids)
    each = [fuse({path: [key for key, _ in ranked] for path, ranked in one.items()}) for one in found]
    fused = each[0]
    if len(each) > 1:
        own = {f.key: f.ranks for f in fused}
        joined = fuse_also([f.key for f in fused], [[f.key for f in one] for one in each[1:]], weight=also_weight)
        fused = [replace(f, ranks=own.get(f.key, {})) for f in joined]
    scores = {path: dict(ranked) for path, ranked in found[0].items()}
    return [
        SearchHit(f.key[0], f.key[1], f.score, dict(f.ranks), {path: scores[path][f.key] for path in f.ranks})
        for f in fused[:k]
    ]


def _alternatives(query: str, also: Sequence[str]) -> list[str]:
    """`also` without blanks and repeats (of the query or of each other), which would count twice."""
    seen = {" ".join(query.split()).casefold()}
    kept = []
    for text in also:
        normal = " ".join(text.split())
        if normal and normal.casefold() not in seen:
            seen.add(normal.casefold())
            kept.append(normal)
    return kept


Ranked = list[tuple[tuple[int, str], float]]


def tool_index_rankings(
    *, tenant_id: int, scope: SearchScope, query: str, k: int, paths: tuple[str, ...] = PATHS, rewrite_ids: bool = True
) -> dict[str, Ranked]:
    """What each of `paths` ranks for `query` before fusion: (backend id, name) with the path's own
    score, best first, at least `MIN_DEPTH` deep (4·k for a larger k). A path with nothing to say
    (no id to read, no word that picks) ranks nothing."""
    return _rankings(tenant_id, scope, [query], k, paths, rewrite_ids)[0]


def _rankings(
    tenant_id: int, scope: SearchScope, queries: Sequence[str], k: int, paths: tuple[str, ...], rewrite_ids: bool
) -> list[dict[str, Ranked]]:
    """`tool_index_rankings` of each of `queries`. Every embedding is queued on the model's thread
    first, in order, and computed one after the other while the full-text queries run; the dense
    queries run last, each as soon as its vector is there."""
    found: list[dict[str, Ranked]] = [{path: [] for path in paths} for _ in queries]
    texts = [" ".join(query.split()) for query in queries]
    if not any(texts):
        return found
    facts = index_facts_get(tenant_id=tenant_id)
    rewrites = [facts.vocabulary.rewrite(text) if rewrite_ids and text else None for text in texts]
    read = [split_identifiers(rewrite.text if rewrite is not None else text) for text, rewrite in zip(texts, rewrites, strict=True)]
    depth = max(MIN_DEPTH, 4 * k)
    vectors = [embedder().encode_soon(text) if DENSE in paths and raw else None for raw, text in zip(texts, read, strict=True)]
    allowed = scope.mask(facts.text, facts.backend_of)
    for raw, rewrite, text, out in zip(texts, rewrites, read, found, strict=True):
        if not raw:
            continue
        if TEXT in paths:
            types = " ".join(m.type for m in rewrite.matches) if rewrite is not None else ""
            out[TEXT] = _full_text(facts, allowed, text, depth, types)
        if REWRITE in paths and rewrite is not None and rewrite.weak:
            out[REWRITE] = _describers(facts, allowed, rewrite)
    for vector, out in zip(vectors, found, strict=True):
        if vector is not None:
            out[DENSE] = _dense(facts, allowed, vector.result(), depth)
    return found


def _dense(
    facts: IndexFacts, allowed: NDArray[np.bool_], embedding: np.ndarray, depth: int
) -> list[tuple[tuple[int, str], float]]:
    """The `depth` tools of the scope nearest to `embedding` by cosine, nearest first; equal ones
    (duplicate texts) by key. Every tool is scored: 0.5 ms for 3,714 of them."""
    chosen = np.flatnonzero(allowed)
    if not chosen.size:
        return []
    # Every tool scored, then the scope's picked: gathering the scope's rows first copies them all.
    similarity = (facts.vectors @ np.asarray(embedding, dtype=np.float32))[chosen]
    if chosen.size > depth:
        near = np.argpartition(-similarity, depth - 1)[:depth]
        chosen, similarity = chosen[near], similarity[near]
    order = np.lexsort((facts.text.order[chosen], -similarity))[:depth]
    keys = facts.text.keys
    return [(keys[at], float(score)) for at, score in zip(chosen[order], similarity[order], strict=True)]


def _describers(facts: IndexFacts, allowed: NDArray[np.bool_], rewrite: Rewrite) -> list[tuple[tuple[int, str], float]]:
    """The tools describing the types of the query's ids, of those in scope: each reading's first,
    then each one's second, and so on (an id read two ways, `acl-` as a network or a web ACL, puts
    the first describer of both near the top), each reading's in the vocabulary's order."""
    position = facts.text.position
    wanted: list[tuple[int, str]] = list(dict.fromkeys(  # type: ignore[misc]
        key for tools in zip_longest(*(m.tools for m in rewrite.matches)) for key in tools if key is not None))
    return [(key, 1.0) for key in wanted if key in position and allowed[position[key]]]


@dataclass(frozen=True, slots=True)
class IndexFacts:
    """What searches of a tenant's index read from the whole index: the id-reading rules, and the
    full-text index (its lexemes too common to select candidates among them)."""

    vocabulary: Vocabulary
    text: TextIndex[tuple[int, str]]
    backend_of: NDArray[np.int64]  # each of `text`'s tools' backend id
    vectors: NDArray[np.float32]  # each of `text`'s tools' embedding, of unit length


_facts: dict[int, tuple[tuple[object, ...], IndexFacts]] = {}
#: One lock a tenant: a tenant's facts are built once however many searches wait for them, while
#: other tenants' searches go on (building takes seconds for a big catalog).
_facts_locks: dict[int, threading.Lock] = {}


def index_facts_get(*, tenant_id: int) -> IndexFacts:
    """The tenant's `IndexFacts`, built again only when the index changed: its version counter in
    Redis tells (or, without Redis, the database)."""
    try:
        stamp: tuple[object, ...] = (redis_client().get(index_version_key(tenant_id)),)
    except redis.RedisError:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*), max(updated_at) FROM retrieval_indexedtool WHERE tenant_id = %s",
                           [tenant_id])
            stamp = tuple(cursor.fetchone() or ())
    cached = _facts.get(tenant_id)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    with _facts_locks.setdefault(tenant_id, threading.Lock()):
        cached = _facts.get(tenant_id)
        if cached is not None and cached[0] == stamp:  # built by the search this one waited for
            return cached[1]
        # The embeddings in pgvector's binary form: parsing 18,378 of them as text took 1 s of 1.5.
        sent = Func(F("embedding"), function="vector_send", output_field=BinaryField())
        rows = list(IndexedTool.objects.filter(tenant_id=tenant_id).order_by("backend_id", "name").annotate(
            sent=sent).values_list("backend_id", "name", "parameters", "description", "backend__name",
                                   "backend__active_spec__title", "search", "sent"))
        vocabulary = Vocabulary.build(
            ToolFacts((backend_id, name), name, parameters or [], description, service, title or "")
            for backend_id, name, parameters, description, service, title, *_ in rows
        )
        text = TextIndex(((row[0], row[1]), tsvector_terms(row[6] or "")) for row in rows)
        backend_of = np.asarray([row[0] for row in rows], dtype=np.int64)
        vectors = _vectors([bytes(row[7]) for row in rows])
        facts = IndexFacts(vocabulary, text, backend_of, vectors)
        _facts[tenant_id] = (stamp, facts)
    return facts


def _vectors(sent: Sequence[bytes]) -> NDArray[np.float32]:
    """Embeddings as pgvector sends them (a 2-byte dimension count, 2 unused bytes, then big-endian
    float4s), as rows of unit length."""
    width = 4 + 4 * DIMENSIONS
    if any(len(one) != width for one in sent):
        raise ValueError(f"an index embedding is not of {DIMENSIONS} dimensions: index again (manage.py tool_index sync)")
    raw = np.frombuffer(b"".join(sent), dtype=np.uint8).reshape(len(sent), width)
    vectors = raw[:, 4:].copy().view(">f4").astype(np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return vectors


@dataclass(frozen=True, slots=True)
class QueryReading:
    """How a search reads a query: `text` is what the dense and full-text paths search for (ids
    read as their types, identifiers split into words); `rewrite` says which ids were read as what
    (None when the query holds none the tenant's catalog explains)."""

    text: str
    rewrite: Rewrite | None


def query_read(*, tenant_id: int, query: str) -> QueryReading:
    """What `tool_index_search` makes of `query` before searching (for showing it: the search reads it itself)."""
    query = " ".join(query.split())
    rewrite = index_facts_get(tenant_id=tenant_id).vocabulary.rewrite(query) if query else None
    return QueryReading(split_identifiers(rewrite.text if rewrite is not None else query), rewrite)


@dataclass(frozen=True, slots=True)
class RewriteRule:
    """One resource type the id-reading rules know: how many parameters take its ids, the longer
    names the documentation gives it, and the tools that describe it, (backend name, tool name) best first."""

    type: str
    weight: int
    longer: tuple[str, ...]
    tools: tuple[tuple[str, str], ...]


def rewrite_rules_list(*, tenant_id: int) -> list[RewriteRule]:
    """The tenant's id-reading rules (`rewrite.py`), the types whose ids most parameters take first."""
    vocabulary = index_facts_get(tenant_id=tenant_id).vocabulary
    names = dict(Backend.objects.filter(tenant_id=tenant_id).values_list("pk", "name"))
    return [
        RewriteRule(rtype.name, rtype.weight, tuple(" ".join(words) for words in sorted(rtype.longer)),
                    tuple((names.get(b, str(b)), n) for b, n in rtype.tools()))  # type: ignore[misc]
        for rtype in sorted(vocabulary.types.values(), key=lambda t: (-t.weight, t.name))
    ]


def rewrite_rules_describe(*, tenant_slug: str, explain: Sequence[str] = ()) -> list[str]:
    """Lines describing the tenant's id-reading rules: every resource type with how many
    parameters take its ids, the longer names it goes by and the tools that describe it; or, for
    each of `explain`, the types it may abbreviate, best first. ValueError for an unknown tenant."""
    tenant = Tenant.objects.filter(slug=tenant_slug).first()
    if tenant is None:
        raise ValueError(f"no tenant {tenant_slug!r}")
    if explain:
        vocabulary = index_facts_get(tenant_id=tenant.pk).vocabulary
        names = dict(Backend.objects.filter(tenant=tenant).values_list("pk", "name"))

        def shown(key: object) -> str:
            backend_id, name = key  # type: ignore[misc]
            return f"{names.get(backend_id, backend_id)}:{name}"

        lines = []
        for token in explain:
            rewrite = vocabulary.rewrite(token)
            if rewrite is None:
                lines.append(f"{token}: not read as any resource type")
                continue
            readings = list(rewrite.matches)
            lines.append(f"{token}: " + "; ".join(
                f"{m.type} (score {m.cost:.2f}) -> {', '.join(shown(key) for key in m.tools[:3])}" for m in readings[:3]))
        return lines
    rules = rewrite_rules_list(tenant_id=tenant.pk)
    lines = [f"{len(rules)} resource types"]
    for rule in rules:
        longer = "; also " + ", ".join(rule.longer) if rule.longer else ""
        lines.append(f"{rule.type} (ids taken by {rule.weight} parameters{longer}): "
                     + ", ".join(f"{b}:{n}" for b, n in rule.tools[:3]))
    return lines


def _full_text(
    facts: IndexFacts, allowed: NDArray[np.bool_] | None, text: str, depth: int, types: str = ""
) -> list[tuple[tuple[int, str], float]]:
    # Any of the query's words may match — a phrase of five words rarely has all five in one tool's
    # text — and BM25 favours the tools that hold more of the rarer ones. Only the tenant's
    # uncommon words pick the candidates (unless it has none), and the words of the resource types
    # its ids were read as (`types`), however common: they are what the query is about. The words
    # are PostgreSQL's lexemes, as the index's vectors hold them.
    with connection.cursor() as cursor:
        cursor.execute("SELECT tsvector_to_array(to_tsvector('english', %s)), tsvector_to_array(to_tsvector('english', %s))",
                       [text, types])
        lexemes, named = cursor.fetchone()
    if not lexemes:
        return []
    common = facts.text.common
    picking = [lexeme for lexeme in lexemes if lexeme not in common or lexeme in named] or lexemes
    return facts.text.rank(lexemes, picking=picking, allowed=allowed, depth=depth)


@dataclass(frozen=True, slots=True)
class HostHit:
    """A search hit on a virtual host, for the console: where the tool is, what the host calls it
    (no name: the host's naming rules drop it), and how each path ranked it."""

    backend_id: int
    backend_name: str
    name: str
    exposed_names: tuple[str, ...]
    hit: SearchHit
    prerequisites: tuple[tuple[str, str], ...]  # (backend name, tool name), dependencies first


def virtual_host_tools_search(*, virtual_host: VirtualHost, query: str, k: int) -> list[HostHit]:
    """What `tool_search` finds on `virtual_host` for a caller who sees every tool (the host's
    access policy is not applied), with each path's rank and score."""
    mounts = {mount.map_key: mount.backend for mount in virtual_host.mounts.select_related("backend")}
    naming = virtual_host_naming_get(virtual_host=virtual_host)
    scope = SearchScope(backends=tuple(sorted({backend.pk for backend in mounts.values()})))
    hits = tool_index_search(tenant_id=virtual_host.tenant_id, scope=scope, query=query, k=k)
    chains = prerequisites_get(tenant_id=virtual_host.tenant_id, keys=[(hit.backend_id, hit.name) for hit in hits])
    names = dict(Backend.objects.filter(tenant_id=virtual_host.tenant_id).values_list("pk", "name"))
    found = []
    for hit in hits:
        keys = [key for key, backend in mounts.items() if backend.pk == hit.backend_id]
        exposed = tuple(name for key in keys for name in naming.tool_names(key, hit.name))
        chain = tuple((names.get(b, str(b)), n) for b, n in chains.get((hit.backend_id, hit.name), ()))
        found.append(HostHit(hit.backend_id, mounts[keys[0]].name, hit.name, exposed, hit, chain))
    return found
