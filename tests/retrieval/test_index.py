"""The tool index and its search, against the real database and the real embedding model."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import CommandError, call_command

from apps.catalog.models import Backend
from apps.catalog.specs import spec_upload
from apps.retrieval import indexing
from apps.retrieval.indexing import tool_index_sync
from apps.retrieval.models import IndexedTool
from apps.retrieval.search import DENSE, TEXT, SearchScope, tool_index_search
from tests.backends.specs import OPERATIONS, network_spec
from tests.factories import openapi_backend_factory, tenant_factory

pytestmark = pytest.mark.django_db

def publish(backend: Backend, document: bytes, capture) -> None:  # noqa: ANN001 - pytest-django fixture
    with capture(execute=True):
        spec_upload(backend=backend, document=document)
    backend.refresh_from_db()


def names(hits: list) -> list[str]:  # noqa: ANN001
    return [hit.name for hit in hits]


def test_publishing_a_spec_indexes_its_tools(indexing_on, django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory(name="cloud")
    publish(backend, network_spec(), django_capture_on_commit_callbacks)
    entries = {e.name: e for e in IndexedTool.objects.filter(backend=backend)}
    assert set(entries) == set(OPERATIONS)
    create_subnet = entries["CreateSubnet"]
    assert create_subnet.tenant_id == backend.tenant_id
    assert create_subnet.document == (
        "Create Subnet (cloud Cloud API) Creates a subnet in the specified VPC."
    )
    assert len(create_subnet.embedding) == 384


def test_search_finds_a_tool_by_paraphrase_and_by_name(indexing_on, django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory(name="cloud")
    publish(backend, network_spec(), django_capture_on_commit_callbacks)
    scope = SearchScope(backends=(backend.pk,))

    hits = tool_index_search(tenant_id=backend.tenant_id, scope=scope, query="open firewall port for inbound traffic", k=3)
    assert hits[0].name == "AuthorizeSecurityGroupIngress"
    hits = tool_index_search(tenant_id=backend.tenant_id, scope=scope, query="shut down my servers", k=3)
    assert hits[0].name == "TerminateInstances"
    # The name itself, as an agent copying it from a document would write it: both paths find it.
    hits = tool_index_search(tenant_id=backend.tenant_id, scope=scope, query="PutObject", k=5)
    assert hits[0].name == "PutObject"
    assert hits[0].ranks == {DENSE: 1, TEXT: 1}
    assert 0 < hits[0].scores[DENSE] <= 1 and hits[0].scores[TEXT] > 0
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_search_never_returns_a_tool_outside_the_scope_at_any_k(indexing_on, django_capture_on_commit_callbacks) -> None:
    tenant = tenant_factory()
    cloud = openapi_backend_factory(tenant=tenant, name="cloud")
    other = openapi_backend_factory(tenant=tenant, name="other")
    publish(cloud, network_spec(), django_capture_on_commit_callbacks)
    publish(other, network_spec({"CreateSubnetGroup": ("Creates a subnet group.", [])}, "Other"),
            django_capture_on_commit_callbacks)
    allowed = ("DescribeVpcs", "SendMessage")
    scope = SearchScope(restricted=((cloud.pk, allowed),))
    for k in (1, 2, 5, 15, 50):
        hits = tool_index_search(tenant_id=tenant.pk, scope=scope, query="create a subnet in my VPC", k=k)
        assert set(names(hits)) <= set(allowed)
        assert len(hits) == min(k, 2)  # found even though the best matches are hidden
    hits = tool_index_search(tenant_id=tenant.pk, scope=scope, query="create a subnet in my VPC", k=50)
    assert names(hits)[0] == "DescribeVpcs"
    # A whole backend, plus names of another.
    scope = SearchScope(backends=(other.pk,), restricted=((cloud.pk, ("CreateSubnet",)),))
    hits = tool_index_search(tenant_id=tenant.pk, scope=scope, query="create a subnet", k=50)
    assert sorted((h.backend_id, h.name) for h in hits) == [(cloud.pk, "CreateSubnet"), (other.pk, "CreateSubnetGroup")]
    # Another tenant's index is out of reach whatever the scope names.
    assert tool_index_search(tenant_id=tenant_factory().pk, scope=scope, query="create a subnet", k=50) == []
    assert tool_index_search(tenant_id=tenant.pk, scope=SearchScope(), query="create a subnet", k=50) == []


def test_search_is_deterministic(indexing_on, django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory(name="cloud")
    publish(backend, network_spec(), django_capture_on_commit_callbacks)
    scope = SearchScope(backends=(backend.pk,))
    for query in ("vpc", "delete things", "instances", "   "):
        first = tool_index_search(tenant_id=backend.tenant_id, scope=scope, query=query, k=15)
        assert all(tool_index_search(tenant_id=backend.tenant_id, scope=scope, query=query, k=15) == first
                   for _ in range(3))
    assert tool_index_search(tenant_id=backend.tenant_id, scope=scope, query="   ", k=15) == []


def test_republishing_embeds_only_what_changed(indexing_on, django_capture_on_commit_callbacks, monkeypatch) -> None:
    backend = openapi_backend_factory(name="cloud")
    publish(backend, network_spec(), django_capture_on_commit_callbacks)
    real = indexing.embedder()
    embedded: list[str] = []

    class Recording:
        name = real.name

        def encode(self, texts: list[str]) -> Any:
            embedded.extend(texts)
            return real.encode(texts)

    monkeypatch.setattr(indexing, "embedder", Recording)
    changed = dict(OPERATIONS)
    changed["DescribeVpcs"] = ("Describes one or more of your VPCs, with their CIDR blocks.", [])
    del changed["SendMessage"]
    changed["ReceiveMessage"] = ("Retrieves messages from the specified queue.", ["QueueUrl"])
    publish(backend, network_spec(changed), django_capture_on_commit_callbacks)
    assert sorted(embedded) == [
        "Describe Vpcs (cloud Cloud API) Describes one or more of your VPCs, with their CIDR blocks.",
        "Receive Message (cloud Cloud API) Retrieves messages from the specified queue.",
    ]
    documents = dict(IndexedTool.objects.filter(backend=backend).values_list("name", "document"))
    assert set(documents) == set(changed)
    assert documents["DescribeVpcs"] in embedded
    assert tool_index_sync(backend_id=backend.pk) == indexing.IndexChange(embedded=0, removed=0, unchanged=len(changed))


def test_a_run_that_sees_its_tools_replaced_writes_nothing(indexing_on, django_capture_on_commit_callbacks,
                                                           monkeypatch) -> None:
    backend = openapi_backend_factory(name="cloud")
    publish(backend, network_spec(), django_capture_on_commit_callbacks)
    IndexedTool.objects.filter(backend=backend).delete()
    real = indexing.embedder()

    class Replacing:
        name = real.name

        def encode(self, texts: list[str]) -> Any:
            # A newer spec is published while this run embeds.
            Backend.objects.filter(pk=backend.pk).update(active_spec=None)
            return real.encode(texts)

    monkeypatch.setattr(indexing, "embedder", Replacing)
    assert tool_index_sync(backend_id=backend.pk).embedded == 0
    assert not IndexedTool.objects.filter(backend=backend).exists()


def test_indexing_is_off_unless_turned_on(django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory(name="cloud")
    publish(backend, network_spec(), django_capture_on_commit_callbacks)
    assert not IndexedTool.objects.filter(backend=backend).exists()


def test_the_command_indexes_every_openapi_backend(django_capture_on_commit_callbacks, capsys) -> None:
    tenant = tenant_factory(slug="acme")
    backend = openapi_backend_factory(tenant=tenant, name="cloud")
    publish(backend, network_spec(), django_capture_on_commit_callbacks)  # indexing off: nothing yet
    call_command("tool_index", "sync", "--tenant", "acme")
    assert f"acme/cloud: {len(OPERATIONS)} embedded, 0 removed, 0 unchanged" in capsys.readouterr().out
    assert IndexedTool.objects.filter(backend=backend).count() == len(OPERATIONS)
    call_command("tool_index", "sync")
    assert f"acme/cloud: 0 embedded, 0 removed, {len(OPERATIONS)} unchanged" in capsys.readouterr().out
    with pytest.raises(CommandError, match="no tenant 'nope'"):
        call_command("tool_index", "sync", "--tenant", "nope")


def test_an_id_query_finds_the_tool_describing_its_type(indexing_on, django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory(name="cloud")
    publish(backend, network_spec(), django_capture_on_commit_callbacks)
    scope = SearchScope(backends=(backend.pk,))
    hits = tool_index_search(tenant_id=backend.tenant_id, scope=scope, query="vpc-0c974c95ca7ceef4a details?", k=5)
    assert hits[0].name == "DescribeVpcs"
    assert hits[0].ranks["rewrite"] == 1
    hits = tool_index_search(tenant_id=backend.tenant_id, scope=scope, query="subnet-6782e71e", k=5)
    assert hits[0].name == "DescribeSubnets"
    # The describing tool is found only where the caller may see it.
    hidden = SearchScope(restricted=((backend.pk, ("CreateSubnet", "DeleteVpc")),))
    hits = tool_index_search(tenant_id=backend.tenant_id, scope=hidden, query="subnet-6782e71e", k=5)
    assert {h.name for h in hits} == {"CreateSubnet", "DeleteVpc"} and all("rewrite" not in h.ranks for h in hits)


def test_prerequisite_chains_are_stored_and_read_with_the_chains_of_their_members(
    indexing_on, django_capture_on_commit_callbacks
) -> None:
    from apps.retrieval.chains import prerequisites_get

    backend = openapi_backend_factory(name="cloud")
    publish(backend, network_spec(), django_capture_on_commit_callbacks)
    chains = dict(IndexedTool.objects.filter(backend=backend).values_list("name", "prerequisites"))
    assert chains["AuthorizeSecurityGroupIngress"] == [[backend.pk, "CreateVpc"], [backend.pk, "CreateSecurityGroup"]]
    assert chains["CreateVpc"] == [] and chains["PutObject"] == [[backend.pk, "CreateBucket"]]
    found = prerequisites_get(tenant_id=backend.tenant_id, keys=[(backend.pk, "AuthorizeSecurityGroupIngress")])
    assert found == {
        (backend.pk, "AuthorizeSecurityGroupIngress"): ((backend.pk, "CreateVpc"), (backend.pk, "CreateSecurityGroup")),
        (backend.pk, "CreateSecurityGroup"): ((backend.pk, "CreateVpc"),),
    }
