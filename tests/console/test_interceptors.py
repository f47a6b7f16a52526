"""The interceptors page of a virtual host: the chain in order, adding one of each kind (a webhook
naming a tenant secret), a refusal shown beside its field with nothing stored, editing, moving,
disabling, removing after a question, a read-only page for a member, and "Try it" (htmx and a
plain POST)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from apps.catalog.credentials import tenant_secret_set
from apps.kernel.interceptors import InterceptorSpec, kind_phases
from apps.kernel.interceptors.secrets import DETECTORS
from apps.policies.selectors import interceptor_specs_list
from apps.policies.services import interceptors_set
from apps.tenants.services import membership_set
from tests import factories

pytestmark = pytest.mark.django_db

AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"  # AWS's documented example key
SECRET_VALUE = "webhook-signing-key-0123456789abcdef"


@pytest.fixture
def world(django_user_model: Any) -> dict[str, Any]:
    tenant = factories.tenant_factory()
    host = factories.virtual_host_factory(tenant=tenant, slug="main")
    tenant_secret_set(tenant=tenant, name="hook-key", value=SECRET_VALUE)
    admin = django_user_model.objects.create_user(username=f"admin-{tenant.slug}", password="pw")
    membership_set(tenant=tenant, user=admin, role="admin")
    member = django_user_model.objects.create_user(username=f"member-{tenant.slug}", password="pw")
    membership_set(tenant=tenant, user=member, role="member")
    return {"tenant": tenant, "host": host, "admin": admin, "member": member}


def _base(world: dict[str, Any]) -> str:
    return f"/console/t/{world['tenant'].slug}/virtual-hosts/{world['host'].pk}/interceptors/"


def spec(name: str, kind: str, **fields: Any) -> InterceptorSpec:
    """An interceptor as the console would store it: on every phase its kind runs on, unless told."""
    return InterceptorSpec(name, kind, **{"phases": kind_phases(kind), **fields})


def _chain(world: dict[str, Any]) -> list[InterceptorSpec]:
    return interceptor_specs_list(virtual_host=world["host"])


def _common(name: str, phases: tuple[str, ...] = ("request", "result")) -> dict[str, Any]:
    return {"name": name, "phases": list(phases), "methods": ["tools/call", "resources/read", "prompts/get"],
            "targets": "", "enabled": "on"}


def _admin(client: Client, world: dict[str, Any]) -> Client:
    client.force_login(world["admin"])
    return client


def test_the_host_page_links_the_interceptors_and_says_how_many(client: Client, world: dict[str, Any]) -> None:
    interceptors_set(virtual_host=world["host"], interceptors=[spec("secrets", "secrets")])
    page = _admin(client, world).get(f"/console/t/{world['tenant'].slug}/virtual-hosts/{world['host'].pk}/")
    text = page.content.decode()
    assert "1 interceptor inspects each call" in text
    assert f'href="{_base(world)}"' in text


def test_the_chain_is_listed_in_order_without_a_secrets_value(client: Client, world: dict[str, Any]) -> None:
    interceptors_set(virtual_host=world["host"], interceptors=[
        spec("keys", "secrets", settings={"action": "refuse", "detectors": ["aws-access-key"]}),
        spec("hook", "webhook", phases=("request",), methods=("tools/call",), targets=("billing-*",),
                        settings={"url": "https://hooks.example.com/check", "secret": "hook-key"}),
        spec("cap", "size", settings={"max_bytes": 5000}, enabled=False),
    ])
    page = _admin(client, world).get(_base(world))
    assert page.status_code == 200
    text = page.content.decode()
    assert text.index('id="interceptor-1"') < text.index("<code>keys</code>") < text.index("<code>hook</code>") \
        < text.index("<code>cap</code>")
    assert f"refuse; 1 of {len(DETECTORS)} detectors" in text
    assert "https://hooks.example.com/check" in text and "signed with secret hook-key" in text
    assert "timeout 2 s, fails closed" in text and "<code>billing-*</code>" in text
    assert "at most 5,000 bytes, truncate" in text and "disabled" in text
    assert SECRET_VALUE not in text


@pytest.mark.parametrize(("kind", "fields", "stored"), [
    ("secrets", {"action": "refuse", "detectors": ["aws-access-key", "private-key"]},
     {"action": "refuse", "detectors": ["aws-access-key", "private-key"]}),
    ("secrets", {"action": "mask", "detectors": list(DETECTORS)}, {}),  # the defaults are left unsaid
    ("personal_data", {"type_email": "mask", "type_phone": "off", "type_card": "refuse", "type_iban": "mask",
                       "type_us_ssn": "mask", "type_uk_nino": "mask", "type_es_dni": "mask",
                       "type_in_aadhaar": "mask"},
     {"types": {"phone": "off", "card": "refuse"}}),
    ("fields", {"rules": "$.user.ssn drop\n\n$..password  mask\n", "deny": "internal-\\d+\n", "deny_action": "mask"},
     {"rules": [{"path": "$.user.ssn", "action": "drop"}, {"path": "$..password", "action": "mask"}],
      "deny": ["internal-\\d+"], "deny_action": "mask"}),
    ("size", {"max_bytes": "2048", "action": "refuse"}, {"max_bytes": 2048, "action": "refuse"}),
    ("injection", {"action": "refuse", "markers": ["override-instructions", "bidi-override"]},
     {"action": "refuse", "markers": ["override-instructions", "bidi-override"]}),
    ("webhook", {"url": "https://hooks.example.com/check", "secret": "hook-key", "timeout_seconds": "0.5",
                 "failure": "open"},
     {"url": "https://hooks.example.com/check", "secret": "hook-key", "timeout_seconds": 0.5, "failure": "open"}),
])
def test_an_interceptor_of_each_kind_is_added(
    client: Client, world: dict[str, Any], kind: str, fields: dict[str, Any], stored: dict[str, Any],
) -> None:
    interceptors_set(virtual_host=world["host"], interceptors=[spec("first", "secrets")])
    _admin(client, world)
    form = client.get(f"{_base(world)}new/", {"kind": kind})
    assert form.status_code == 200
    phases = ("result",) if kind in {"size", "injection"} else ("request", "result")
    # Only the phases the kind runs on are offered.
    assert ('value="request"' in form.content.decode()) == ("request" in phases)
    response = client.post(f"{_base(world)}new/", {"kind": kind, **_common("added", phases), **fields})
    assert response.status_code == 302, response.content.decode()
    chain = _chain(world)
    assert [spec.name for spec in chain] == ["first", "added"]
    assert (chain[1].kind, chain[1].phases, dict(chain[1].settings)) == (kind, phases, stored)
    assert client.get(response.url).content.decode().count("Interceptor added added at position 2.") == 1


def test_the_webhook_form_offers_the_tenants_secret_names_only(client: Client, world: dict[str, Any]) -> None:
    other = factories.tenant_factory()
    tenant_secret_set(tenant=other, name="not-ours", value="x" * 32)
    text = _admin(client, world).get(f"{_base(world)}new/", {"kind": "webhook"}).content.decode()
    assert '<option value="hook-key">hook-key</option>' in text
    assert "not-ours" not in text and SECRET_VALUE not in text


def test_a_refusal_is_shown_beside_its_field_and_nothing_is_stored(client: Client, world: dict[str, Any]) -> None:
    interceptors_set(virtual_host=world["host"], interceptors=[spec("first", "secrets")])
    _admin(client, world)
    response = client.post(f"{_base(world)}new/", {
        "kind": "webhook", **_common("hook"), "url": "http://hooks.example.com/", "secret": "hook-key",
        "timeout_seconds": "99", "failure": "closed"})
    assert response.status_code == 400
    text = response.content.decode()
    assert 'id="id_url_error">url must be https (plain http only to a service on the gateway' in text
    assert 'id="id_timeout_seconds_error">timeout_seconds must be a number from 0.05 to 30' in text
    assert [spec.name for spec in _chain(world)] == ["first"]
    # A name another interceptor has, and a bad deny pattern, beside their fields too.
    response = client.post(f"{_base(world)}new/", {"kind": "fields", **_common("first"), "rules": "",
                                                    "deny": "(unclosed", "deny_action": "refuse"})
    text = response.content.decode()
    assert response.status_code == 400
    assert "id=\"id_name_error\">the name &#x27;first&#x27; is used by another interceptor" in text
    assert 'id="id_deny_error">deny pattern 1 is not a valid regular expression' in text
    assert 'value="(unclosed"' not in text and "(unclosed</textarea>" in text  # what was typed stays
    assert len(_chain(world)) == 1


def test_a_field_rule_without_its_action_is_refused_in_the_services_words(client: Client, world: dict[str, Any]) -> None:
    response = _admin(client, world).post(f"{_base(world)}new/", {
        "kind": "fields", **_common("fields"), "rules": "$.a", "deny": "", "deny_action": "refuse"})
    assert response.status_code == 400
    assert 'id="id_rules_error">rule 1: action must be drop or mask' in response.content.decode()
    assert _chain(world) == []


def test_an_interceptor_is_edited_in_place(client: Client, world: dict[str, Any]) -> None:
    interceptors_set(virtual_host=world["host"], interceptors=[
        spec("keys", "secrets"), spec("cap", "size", settings={"max_bytes": 5000})])
    _admin(client, world)
    form = client.get(f"{_base(world)}cap/edit/").content.decode()
    assert 'value="5000"' in form and "Edit interceptor cap" in form
    response = client.post(f"{_base(world)}cap/edit/", {**_common("cap-big", ("result",)), "max_bytes": "900000",
                                                         "action": "truncate", "targets": "big-*\nhuge"})
    assert response.status_code == 302
    chain = _chain(world)
    assert [spec.name for spec in chain] == ["keys", "cap-big"]
    assert chain[1].targets == ("big-*", "huge") and dict(chain[1].settings) == {"max_bytes": 900000}
    assert client.get(f"{_base(world)}nothing/edit/").status_code == 404


def test_interceptors_move_and_are_disabled_and_enabled(client: Client, world: dict[str, Any]) -> None:
    interceptors_set(virtual_host=world["host"], interceptors=[
        spec("a", "secrets"), spec("b", "personal_data"), spec("c", "injection")])
    _admin(client, world)
    assert client.post(f"{_base(world)}c/move/", {"direction": "up"}).status_code == 302
    assert [spec.name for spec in _chain(world)] == ["a", "c", "b"]
    client.post(f"{_base(world)}a/move/", {"direction": "up"})  # already first: nothing moves
    client.post(f"{_base(world)}a/move/", {"direction": "down"})
    assert [spec.name for spec in _chain(world)] == ["c", "a", "b"]
    assert client.post(f"{_base(world)}b/enable/", {"enabled": "no"}).status_code == 302
    assert [spec.enabled for spec in _chain(world)] == [True, True, False]
    assert "Interceptor b disabled" in client.get(_base(world)).content.decode()
    client.post(f"{_base(world)}b/enable/", {"enabled": "yes"})
    assert all(spec.enabled for spec in _chain(world))


def test_removing_asks_first(client: Client, world: dict[str, Any]) -> None:
    interceptors_set(virtual_host=world["host"], interceptors=[
        spec("a", "secrets"), spec("b", "size")])
    _admin(client, world)
    question = client.get(f"{_base(world)}a/remove/")
    assert question.status_code == 200
    assert "Remove interceptor a from main?" in question.content.decode()
    assert len(_chain(world)) == 2
    assert client.post(f"{_base(world)}a/remove/").status_code == 302
    assert [spec.name for spec in _chain(world)] == ["b"]


def test_a_member_sees_the_page_read_only(client: Client, world: dict[str, Any]) -> None:
    interceptors_set(virtual_host=world["host"], interceptors=[spec("keys", "secrets")])
    client.force_login(world["member"])
    text = client.get(_base(world)).content.decode()
    assert "<code>keys</code>" in text
    assert "Add an interceptor" not in text and "/keys/edit/" not in text and "Remove" not in text
    assert client.get(f"{_base(world)}new/", {"kind": "secrets"}).status_code == 403
    assert client.get(f"{_base(world)}keys/edit/").status_code == 403
    assert client.get(f"{_base(world)}keys/remove/").status_code == 403
    for action, data in (("keys/move/", {"direction": "down"}), ("keys/enable/", {"enabled": "no"}),
                         ("keys/remove/", {}), ("new/", {"kind": "secrets", **_common("x")})):
        assert client.post(f"{_base(world)}{action}", data).status_code == 403
    assert _chain(world) == [spec("keys", "secrets")]


def test_another_tenants_host_is_not_found(client: Client, world: dict[str, Any]) -> None:
    other = factories.virtual_host_factory()
    _admin(client, world)
    assert client.get(f"/console/t/{world['tenant'].slug}/virtual-hosts/{other.pk}/interceptors/").status_code == 404


def _trial(kind: str = "secrets") -> dict[str, str]:
    return {"try-phase": "result", "try-method": "tools/call", "try-target": "echo",
            "try-sample": f"my config: aws_access_key_id={AWS_KEY_ID}"}


def test_try_it_answers_htmx_with_the_steps_and_the_content_after(client: Client, world: dict[str, Any]) -> None:
    interceptors_set(virtual_host=world["host"], interceptors=[
        spec("keys", "secrets"),
        spec("hook", "webhook", settings={"url": "https://hooks.example.com/", "secret": "hook-key"})])
    client.force_login(world["member"])  # a trial changes nothing: a member may run it
    response = client.post(f"{_base(world)}try/", _trial(), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    text = response.content.decode()
    assert "<html" not in text
    assert "<code>keys</code>" in text and "rewrite" in text and "<code>aws-access-key</code>" in text
    assert "skipped" in text and "webhooks are not asked in a trial" in text
    assert "[REDACTED:aws-access-key]" in text and AWS_KEY_ID not in text
    after = text[text.index('id="trial-after">') + len('id="trial-after">'):text.index("</pre>")]
    assert json.loads(after.replace("&quot;", '"'))["result"]["content"][0]["text"] == \
        "my config: aws_access_key_id=[REDACTED:aws-access-key]"


def test_try_it_as_a_plain_post_shows_the_whole_page_and_a_refusal(client: Client, world: dict[str, Any]) -> None:
    interceptors_set(virtual_host=world["host"], interceptors=[
        spec("cards", "personal_data", settings={"types": {"card": "refuse"}})])
    _admin(client, world)
    sample = json.dumps({"note": "pay with 4111 1111 1111 1111"})
    response = client.post(f"{_base(world)}try/", {"try-phase": "request", "try-method": "tools/call",
                                                   "try-target": "pay", "try-sample": sample})
    assert response.status_code == 200
    text = response.content.decode()
    assert "<h1>Interceptors of main</h1>" in text
    assert "Refused</strong> by <code>cards</code>" in text and "<code>card</code>" in text
    assert 'id="trial-after"' not in text
    # Nothing applies on a phase no interceptor runs on… and a sample is required.
    interceptors_set(virtual_host=world["host"], interceptors=[spec("cap", "size")])
    none = client.post(f"{_base(world)}try/", {**_trial(), "try-phase": "request"}).content.decode()
    assert "No enabled interceptor applies to this call" in none
    missing = client.post(f"{_base(world)}try/", {**_trial(), "try-sample": ""})
    assert missing.status_code == 400 and "This field is required." in missing.content.decode()
    fragment = client.post(f"{_base(world)}try/", {**_trial(), "try-sample": ""}, HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200 and "Sample: This field is required." in fragment.content.decode()


def test_a_json_sample_is_wrapped_as_the_call_carries_it(client: Client, world: dict[str, Any]) -> None:
    interceptors_set(virtual_host=world["host"], interceptors=[
        spec("strip", "fields", settings={"rules": [{"path": "$.ssn", "action": "drop"}]})])
    _admin(client, world)
    sample = json.dumps({"name": "Ada", "ssn": "078-05-1120"})
    request = client.post(f"{_base(world)}try/", {**_trial(), "try-phase": "request", "try-sample": sample},
                          HTTP_HX_REQUEST="true").content.decode()
    assert "078-05-1120" not in request and "&quot;arguments&quot;: {\n    &quot;name&quot;: &quot;Ada&quot;" in request
    result = client.post(f"{_base(world)}try/", {**_trial(), "try-sample": sample},
                         HTTP_HX_REQUEST="true").content.decode()
    assert "078-05-1120" not in result and "structuredContent" in result
