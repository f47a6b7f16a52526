"""The tool tester's service (`apps.gateway.tool_tester`) on a gateway of faked ports: who it calls as
(a key, as the gateway's configuration has it; a user's test identity, its budget capped by the plan),
the name it calls the tool by, and what it refuses before anything is called."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest
from channels.db import database_sync_to_async

from apps.gateway import tool_tester
from apps.gateway.pipeline.values import BackendView, VirtualHostView
from apps.gateway.tool_tester import TEST_IDENTITY_SCOPE, TryRefused, console_principal, tool_call_try
from apps.kernel.identity import Principal
from apps.tenants.services import api_key_revoke, plan_set, tenant_plan_set
from tests.factories import api_key_factory, tenant_factory
from tests.gateway.pipeline.test_gateway import Audit, standalone_gateway
from tests.gateway.pipeline.test_local import FakeTools

pytestmark = pytest.mark.django_db(transaction=True)


class Snapshot:
    """The tenant's configuration as the gateway has it: host `main` composing backend 3 under
    `calc` (its tools named `calc-<name>`) with another, and the keys given."""

    def __init__(self, tenant: Any, server: FakeTools, keys: dict[int, Principal]) -> None:
        calc = BackendView(id=3, name="calc", transport="", urls=(), timeout=2, kind="openapi", server=server)
        other = BackendView(id=4, name="other", transport="", urls=(), timeout=2, kind="openapi", server=FakeTools())
        self.host = VirtualHostView(tenant.pk, tenant.slug, "main", MappingProxyType({"calc": calc, "other": other}),
                                    MappingProxyType({}))
        self.slug = tenant.slug
        self.keys = keys

    async def tenant(self, slug: str) -> Snapshot | None:
        return self if slug == self.slug else None

    def virtual_host(self, slug: str) -> VirtualHostView | None:
        return self.host if slug == "main" else None

    def principal_for_key(self, key_id: int) -> Principal | None:
        found = self.keys.get(key_id)
        return None if found is None else replace(found, anonymous=True)  # as the snapshot gives it

    def recheck(self) -> None:
        pass


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    tenant = tenant_factory()
    tenant_plan_set(tenant=tenant, plan=plan_set(name="small", daily=100, monthly=None))
    key = api_key_factory(tenant=tenant, name="agent").api_key
    server, audit = FakeTools(), Audit()
    principal = Principal(tenant.pk, tenant.slug, key.pk, "agent", "platform")
    snapshot = Snapshot(tenant, server, {key.pk: principal})
    monkeypatch.setattr(tool_tester, "gateway", lambda: standalone_gateway(directory=snapshot, audit=audit))
    return {"tenant": tenant, "key": key, "server": server, "audit": audit, "snapshot": snapshot}


def _try(world: dict[str, Any], **changes: Any) -> Any:
    values = {"tenant": world["tenant"], "virtual_host": "main", "map_key": "calc", "backend_id": 3,
              "upstream_name": "add", "arguments": {"a": 1}, "key": world["key"], "username": "ada", "user_id": 5}
    return tool_call_try(**{**values, **changes})


async def test_a_call_as_a_key_uses_the_keys_principal_and_the_name_the_host_gives_the_tool(world: dict) -> None:
    tried = await _try(world)
    assert tried.status == 200 and tried.result["content"] == [{"type": "text", "text": "3"}]
    assert (tried.exposed_name, tried.caller, tried.virtual_host) == ("calc-add", "key:agent", "main")
    assert world["server"].calls[0][:2] == ("add", {"a": 1})
    [entry] = world["audit"].entries
    assert (entry.origin, entry.principal.console_user, entry.principal.team, entry.api_key_id) == (
        "console", "ada", "platform", world["key"].pk)
    assert entry.principal.anonymous is False and entry.trace_id == tried.trace_id and entry.exposed_name == "calc-add"


async def test_a_call_as_my_test_identity_has_no_key_no_team_and_the_plans_budget(world: dict) -> None:
    tried = await _try(world, key=None)
    assert tried.caller == "key:console:ada"
    [entry] = world["audit"].entries
    principal = entry.principal
    assert (principal.key_name, principal.team, principal.limits, principal.scopes) == ("console:ada", None, (), ())
    assert principal.key_id < -(2**56) and entry.api_key_id is None and entry.origin == "console"
    [budget] = principal.budgets
    assert (budget.scope, budget.name, budget.daily, budget.monthly, budget.daily_plan) == (
        TEST_IDENTITY_SCOPE, "ada", 100, None, "small")


async def test_without_a_plan_the_test_identity_has_no_budget() -> None:
    tenant = await database_sync_to_async(tenant_factory)()
    principal = await database_sync_to_async(console_principal)(tenant=tenant, username="bo", user_id=1)
    assert principal.budgets == () and principal.console_user == "bo"


@pytest.mark.parametrize(("changes", "words"), [
    ({"virtual_host": "gone"}, "does not serve the virtual host 'gone'"),
    ({"map_key": "nope"}, "does not mount the tool's backend under 'nope'"),
    ({"backend_id": 4}, "does not mount the tool's backend under 'calc'"),
])
async def test_what_the_gateway_does_not_serve_is_refused_before_anything_is_called(
    world: dict, changes: dict[str, Any], words: str
) -> None:
    with pytest.raises(TryRefused, match=words):
        await _try(world, **changes)
    assert world["server"].calls == [] and world["audit"].entries == []


async def test_a_revoked_key_or_one_the_gateway_no_longer_knows_cannot_call(world: dict) -> None:
    key = world["key"]
    world["snapshot"].keys.clear()  # revoked as the gateway's configuration has it
    with pytest.raises(TryRefused, match="'agent' is revoked or expired"):
        await _try(world)
    await database_sync_to_async(api_key_revoke)(api_key=key)
    with pytest.raises(TryRefused, match="'agent' is revoked: it cannot call"):
        await _try(world, key=await database_sync_to_async(lambda: type(key).objects.get(pk=key.pk))())
    assert world["server"].calls == [] and world["audit"].entries == []


async def test_a_key_with_its_own_credential_for_the_backend_is_its_owners_to_try(world: dict) -> None:
    from apps.catalog.credentials import IdentitySecret, egress_credential_set
    from tests.factories import backend_factory

    def personal() -> int:
        backend = backend_factory(tenant=world["tenant"])
        egress_credential_set(backend=backend, kind="bearer", source="per_identity",
                              identities=[IdentitySecret("key", "agent", "alice-personal-token")])
        return backend.pk

    backend_id = await database_sync_to_async(personal)()
    snapshot = world["snapshot"]
    snapshot.host = replace(snapshot.host, mounts=MappingProxyType(
        {**snapshot.host.mounts, "calc": replace(snapshot.host.mounts["calc"], id=backend_id)}), naming=None)
    with pytest.raises(TryRefused, match="has its own credential for this backend: only its owner"):
        await _try(world, backend_id=backend_id, user_id=(world["key"].owner_id or 0) + 1000)  # not its owner
    assert world["server"].calls == [] and world["audit"].entries == []
