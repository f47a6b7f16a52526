"""How a search reaches its candidates: the query's embedding, the words that pick full-text
candidates, and the way the dense query walks the index (apps/retrieval/search.py), against the
real database and the real embedding model."""

from __future__ import annotations

import numpy as np
import pytest

from apps.retrieval import search
from apps.retrieval.embeddings import Embedder, embedder, model_source
from apps.retrieval.search import DENSE, TEXT, SearchScope, tool_index_search
from tests.backends.specs import OPERATIONS, network_spec
from tests.factories import openapi_backend_factory
from tests.retrieval.test_index import publish

pytestmark = pytest.mark.django_db

TEXTS = [
    "find the subnets of my vpc",
    "x",
    "Ünïcödé — 東京 région",
    "list every bucket with its lifecycle rules " * 40,  # past the model's 256 tokens: truncated alike
]


def test_a_query_is_embedded_as_the_model_embeds_documents() -> None:
    model = embedder()
    for text in TEXTS:
        vector = model.encode_soon(text).result()
        assert vector.shape == (384,)
        assert np.allclose(vector, model.encode([text])[0], atol=1e-4)
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5


def test_a_model_that_cannot_be_traced_embeds_queries_the_plain_way(monkeypatch, caplog) -> None:  # noqa: ANN001
    import torch

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("not traceable")

    monkeypatch.setattr(torch.jit, "trace", refuse)
    model = Embedder(model_source(), threads=1)
    vector = model.encode_soon(TEXTS[0]).result()
    assert np.allclose(vector, embedder().encode([TEXTS[0]])[0], atol=1e-5)
    assert "cannot be traced" in caplog.text


GADGETS = {f"ReadGadget{n}": (f"Reads gadget number {n} of the fleet.", []) for n in range(20)}
GADGETS["FrobnicateGadget"] = ("Frobnicates a gadget.", [])


def test_only_uncommon_words_pick_full_text_candidates(indexing_on, django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory(name="gadgets")
    publish(backend, network_spec(GADGETS, "Gadget API"), django_capture_on_commit_callbacks)
    scope = SearchScope(backends=(backend.pk,))

    # "gadget" is in every tool: only "frobnicate" picks, and "gadget" still ranks.
    hits = tool_index_search(tenant_id=backend.tenant_id, scope=scope, query="frobnicate my gadget", k=50)
    assert [h.name for h in hits if TEXT in h.ranks] == ["FrobnicateGadget"]
    assert hits[0].name == "FrobnicateGadget"
    assert len(hits) == len(GADGETS)  # the dense path still ranks them all
    # A query of common words alone: they pick.
    hits = tool_index_search(tenant_id=backend.tenant_id, scope=scope, query="gadget fleet", k=50)
    assert len([h for h in hits if TEXT in h.ranks]) == len(GADGETS)


def test_full_text_weighs_a_rare_word_above_common_ones(indexing_on, django_capture_on_commit_callbacks) -> None:
    # ts_rank counted matching words, not how rare they are: 15 tools holding "security" and
    # "group" (not common: 7 % of the tools) buried the one holding "ingress".
    operations = {f"DescribeSecurityGroupThing{n}": (f"Describes security group thing {n}.", []) for n in range(15)}
    operations |= {f"ReadWidget{n}": (f"Reads widget {n}.", []) for n in range(200)}
    operations["AuthorizeIngress"] = ("Adds an ingress rule.", [])
    backend = openapi_backend_factory(name="cloud")
    publish(backend, network_spec(operations), django_capture_on_commit_callbacks)
    scope = SearchScope(backends=(backend.pk,))
    hits = tool_index_search(tenant_id=backend.tenant_id, scope=scope, query="security group ingress", k=5, paths=(TEXT,))
    assert hits[0].name == "AuthorizeIngress"


def test_the_type_an_id_is_read_as_picks_candidates_however_common(
    indexing_on, django_capture_on_commit_callbacks
) -> None:
    # Every tool takes or names a subnet: the word is common, yet the id's type is what is asked about.
    operations = {name: spec for name, spec in OPERATIONS.items() if "Subnet" in name}
    operations |= {f"TagSubnet{n}": (f"Tags subnet set {n}.", ["SubnetId"]) for n in range(6)}
    backend = openapi_backend_factory(name="cloud")
    publish(backend, network_spec(operations), django_capture_on_commit_callbacks)
    scope = SearchScope(backends=(backend.pk,))
    hits = tool_index_search(tenant_id=backend.tenant_id, scope=scope, query="owner of subnet-6782e71e", k=50)
    found_by_text = {h.name for h in hits if TEXT in h.ranks}
    assert "DescribeSubnets" in found_by_text and len(found_by_text) == len(operations)


@pytest.mark.parametrize("query", [
    "o'brien \\ ' & | ! <-> :* ( ) \\'",
    "'''",
    "the of and",  # stop words only: no full-text lexeme at all
    "DROP TABLE retrieval_indexedtool; --",
])
def test_hostile_or_empty_words_are_searched_as_text(indexing_on, django_capture_on_commit_callbacks, query: str) -> None:
    backend = openapi_backend_factory(name="cloud")
    publish(backend, network_spec(), django_capture_on_commit_callbacks)
    scope = SearchScope(backends=(backend.pk,))
    hits = tool_index_search(tenant_id=backend.tenant_id, scope=scope, query=query, k=5)
    assert len(hits) == 5  # the dense path always answers
    assert tool_index_search(tenant_id=backend.tenant_id, scope=scope, query="subnet", k=1)[0].name


def test_the_dense_path_ranks_the_scope_exactly_by_cosine_whatever_k(
    indexing_on, django_capture_on_commit_callbacks
) -> None:
    from apps.retrieval.models import IndexedTool

    backend = openapi_backend_factory(name="cloud")
    publish(backend, network_spec(), django_capture_on_commit_callbacks)
    whole = SearchScope(backends=(backend.pk,))
    part = SearchScope(restricted=((backend.pk, ("DescribeVpcs", "CreateSubnet", "SendMessage", "Nope")),))
    query = "create a subnet in my VPC"
    vector = embedder().encode_soon(search.query_read(tenant_id=backend.tenant_id, query=query).text).result()
    stored = IndexedTool.objects.filter(backend=backend).values_list("name", "embedding")
    cosine = {name: float(np.dot(e, vector) / np.linalg.norm(e)) for name, e in stored}

    def dense(scope: SearchScope, k: int) -> list[str]:
        return [h.name for h in tool_index_search(tenant_id=backend.tenant_id, scope=scope, query=query, k=k,
                                                  paths=(DENSE,))]

    assert dense(whole, 50) == sorted(cosine, key=lambda name: (-round(cosine[name], 5), name))
    assert dense(whole, 3) == dense(whole, 50)[:3]  # a nearest-neighbour walk asked for fewer found others
    assert dense(part, 50) == [n for n in dense(whole, 50) if n in {"DescribeVpcs", "CreateSubnet", "SendMessage"}]
    assert dense(SearchScope(), 5) == []


def test_prerequisites_are_read_in_one_query_through_cycles_and_never_from_another_tenant(
    indexing_on, django_capture_on_commit_callbacks, django_assert_num_queries
) -> None:
    from apps.retrieval.chains import prerequisites_get
    from apps.retrieval.models import IndexedTool

    backend = openapi_backend_factory(name="cloud")
    publish(backend, network_spec(), django_capture_on_commit_callbacks)
    b = backend.pk
    # A cycle, as hand-edited or stale rows might hold one: A needs B, B needs A (and CreateVpc).
    IndexedTool.objects.filter(backend=backend, name="DeleteVpc").update(prerequisites=[[b, "DescribeVpcs"]])
    IndexedTool.objects.filter(backend=backend, name="DescribeVpcs").update(
        prerequisites=[[b, "CreateVpc"], [b, "DeleteVpc"]])
    with django_assert_num_queries(1):
        found = prerequisites_get(tenant_id=backend.tenant_id, keys=[(b, "DeleteVpc"), (b, "DeleteVpc")])
    assert found == {
        (b, "DeleteVpc"): ((b, "DescribeVpcs"),),
        (b, "DescribeVpcs"): ((b, "CreateVpc"), (b, "DeleteVpc")),
    }
    other = openapi_backend_factory(name="cloud")  # another tenant's backend
    assert prerequisites_get(tenant_id=other.tenant_id, keys=[(b, "DeleteVpc")]) == {}
    assert prerequisites_get(tenant_id=backend.tenant_id, keys=[]) == {}


def test_alternatives_are_searched_and_repeats_of_the_query_count_once(
    indexing_on, django_capture_on_commit_callbacks
) -> None:
    backend = openapi_backend_factory(name="cloud")
    publish(backend, network_spec(), django_capture_on_commit_callbacks)
    scope = SearchScope(backends=(backend.pk,))

    def found(**kwargs: object) -> list[tuple[str, float]]:
        hits = tool_index_search(tenant_id=backend.tenant_id, scope=scope, query="shut down my servers", k=50,
                                 **kwargs)  # type: ignore[arg-type]
        return [(h.name, h.score) for h in hits]

    alone = found()
    assert found(also=["  SHUT down my   servers", "shut down my servers", " "]) == alone
    joined = found(also=["send a message to a queue"])
    assert joined != alone and alone[0][0] in [name for name, _ in joined[:5]]
    assert {name for name, _ in joined} == {name for name, _ in alone}


def test_an_id_read_two_ways_puts_the_first_describer_of_both_first(
    indexing_on, django_capture_on_commit_callbacks
) -> None:
    # `acl-` is the head noun of both types; the web ACL's ids are taken more often, so it is the
    # first reading, and its three describers would fill the first three places alone.
    operations = {
        "DescribeWebAcls": ("Describes web ACLs.", []), "GetWebAcl": ("Gets a web ACL.", ["WebAclId"]),
        "ListWebAcls": ("Lists web ACLs.", []), "DescribeNetworkAcls": ("Describes network ACLs.", []),
        "DeleteNetworkAcl": ("Deletes a network ACL.", ["NetworkAclId"]),
        **{f"UseWebAcl{n}": (f"Uses a web ACL {n}.", ["WebAclId"]) for n in range(4)},
    }
    backend = openapi_backend_factory(name="cloud")
    publish(backend, network_spec(operations), django_capture_on_commit_callbacks)
    scope = SearchScope(backends=(backend.pk,))
    ranked = search.tool_index_rankings(tenant_id=backend.tenant_id, scope=scope, query="acl-5fb85d36", k=5,
                                        paths=(search.REWRITE,))
    assert [name for (_, name), _ in ranked[search.REWRITE]][:2] == ["DescribeWebAcls", "DescribeNetworkAcls"]


@pytest.mark.django_db(transaction=True)  # the builds run on threads of their own, each with its connection
def test_a_tenants_index_facts_are_built_once_and_never_wait_for_another_tenants(monkeypatch) -> None:  # noqa: ANN001
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    from apps.retrieval.rewrite import Vocabulary
    from tests.factories import tenant_factory

    slow, quick = tenant_factory(), tenant_factory()
    entered, release = threading.Event(), threading.Event()
    builds: list[int] = []
    build = Vocabulary.build.__func__  # type: ignore[attr-defined]

    def held(cls, tools):  # noqa: ANN001, ANN202
        tools = list(tools)
        builds.append(threading.get_ident())
        if threading.current_thread().name.startswith("slow"):
            entered.set()
            assert release.wait(10)
        return build(cls, tools)

    monkeypatch.setattr(Vocabulary, "build", classmethod(held))

    def facts(tenant_id: int) -> object:
        try:
            return search.index_facts_get(tenant_id=tenant_id)
        finally:
            connection.close()

    with ThreadPoolExecutor(2, thread_name_prefix="slow") as waiting:
        first = waiting.submit(facts, slow.pk)
        assert entered.wait(10)
        second = waiting.submit(facts, slow.pk)  # waits for the first one's build, builds nothing
        with ThreadPoolExecutor(1, thread_name_prefix="quick") as other:
            assert other.submit(facts, quick.pk).result(timeout=10) is not None  # while `slow` is held
        release.set()
        assert first.result(timeout=10) is second.result(timeout=10)
    assert len(builds) == 2  # one build a tenant
