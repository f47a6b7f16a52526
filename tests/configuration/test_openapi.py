"""OpenAPI backends in the configuration file: `spec:` (relative to the file), base URL, credential."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.catalog.models import Backend, SpecVersion, Tool
from apps.common.secrets import secret_decrypt
from apps.configuration.document import ConfigInvalid
from apps.configuration.reports import Action
from apps.configuration.services import config_apply, config_export
from tests.backends.specs import as_json, as_yaml, service_spec, swagger_spec

pytestmark = pytest.mark.django_db

DOCUMENT = """
tenants:
  - slug: acme
    name: Acme
backends:
  - tenant: acme
    name: pets
    kind: openapi
    spec: specs/pets.json
    base_url: "http://127.0.0.1:9002"
    timeout_seconds: 5
    credential: {kind: bearer, secret_env: PETS_TOKEN}
virtual_hosts:
  - tenant: acme
    slug: main
    backends: {pets: pets}
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "pets.json").write_bytes(as_json(service_spec()))
    monkeypatch.setenv("PETS_TOKEN", "tok-1")
    return tmp_path


def test_a_spec_path_is_read_relative_to_the_file_and_compiled(folder: Path, django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        report = config_apply(document=DOCUMENT, prune=False, base_dir=folder)
    backend = Backend.objects.get(name="pets")
    assert backend.kind == "openapi" and backend.base_url == "http://127.0.0.1:9002" and backend.timeout_seconds == 5
    assert [c.detail for c in report.changes if c.kind == "backend"] == ["spec v1 uploaded, credential"]
    (version,) = SpecVersion.objects.filter(backend=backend)
    assert report.spec_versions == (version.pk,)
    assert version.status == SpecVersion.Status.READY and version.filename == "pets.json"
    assert Tool.objects.filter(backend=backend).count() == 13
    assert secret_decrypt(backend.credential.secret) == "tok-1" and backend.credential.kind == "bearer"


def test_reapplying_uploads_only_a_changed_spec(folder: Path, django_capture_on_commit_callbacks) -> None:
    config_apply(document=DOCUMENT, prune=False, base_dir=folder)
    again = config_apply(document=DOCUMENT, prune=False, base_dir=folder)
    assert not again.changed and again.spec_versions == ()
    (folder / "specs" / "pets.json").write_bytes(as_yaml(swagger_spec()))
    with django_capture_on_commit_callbacks(execute=True):
        changed = config_apply(document=DOCUMENT, prune=False, base_dir=folder)
    assert {(c.kind, c.action, c.detail) for c in changed.changes if c.kind == "backend"} == {
        ("backend", Action.UPDATED, "spec v2 uploaded")
    }
    backend = Backend.objects.get(name="pets")
    assert backend.active_spec.number == 2
    assert set(Tool.objects.filter(backend=backend).values_list("name", flat=True)) == {"getItem", "listItems"}


def test_a_changed_credential_secret_is_set_again(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_apply(document=DOCUMENT, prune=False, base_dir=folder)
    monkeypatch.setenv("PETS_TOKEN", "tok-2")
    report = config_apply(document=DOCUMENT, prune=False, base_dir=folder)
    assert [c.detail for c in report.changes if c.kind == "backend"] == ["credential"]
    assert secret_decrypt(Backend.objects.get(name="pets").credential.secret) == "tok-2"


@pytest.mark.parametrize(
    ("edit", "path", "words"),
    [
        (("spec: specs/pets.json", "spec: specs/missing.json"), "backends[0]", "cannot read"),
        (("    spec: specs/pets.json\n", "    spec: specs/pets.json\n    urls: [\"http://x:1\"]\n"),
         "backends[0].urls", "no replica URLs"),
        (("base_url: \"http://127.0.0.1:9002\"", "base_url: \"ftp://nope\""), "backends[0].base_url", "invalid URL"),
        (("secret_env: PETS_TOKEN", "secret_env: NOT_SET_ANYWHERE"), "backends[0]", "NOT_SET_ANYWHERE"),
        (("{kind: bearer, secret_env: PETS_TOKEN}", "{kind: api_key_header, secret: x}"),
         "backends[0].credential.name", "needs the header"),
        (("kind: openapi", "kind: mcp"), "backends[0].base_url", "only OpenAPI backends"),
    ],
)
def test_bad_openapi_fields_are_reported_and_nothing_is_written(
    folder: Path, edit: tuple[str, str], path: str, words: str
) -> None:
    document = DOCUMENT.replace(*edit)
    assert document != DOCUMENT
    with pytest.raises(ConfigInvalid) as caught:
        config_apply(document=document, prune=False, base_dir=folder)
    assert any(p.path.startswith(path) and words in p.message for p in caught.value.problems), caught.value.problems
    assert not Backend.objects.exists() and not SpecVersion.objects.exists()


def test_the_export_of_an_openapi_backend_applies_unchanged(folder: Path) -> None:
    config_apply(document=DOCUMENT, prune=False, base_dir=folder)
    exported = config_export()
    assert "kind: openapi" in exported and "base_url: http://127.0.0.1:9002" in exported and "urls" not in exported
    assert not config_apply(document=exported, prune=False).changed


@pytest.mark.django_db(transaction=True)
def test_the_command_waits_for_the_compile_and_prints_the_outcome(folder: Path) -> None:
    # CELERY_TASK_ALWAYS_EAGER: the compile runs when the apply commits.
    config_file = folder / "gateway.yaml"
    config_file.write_text(DOCUMENT, encoding="utf-8")
    out = io.StringIO()
    call_command("gateway", "apply", "-f", str(config_file), stdout=out)
    assert "spec acme/pets v1: ready, 13 tools (+13 -0 ~0), 0 warning(s)" in out.getvalue()
    (folder / "specs" / "pets.json").write_bytes(b'{"openapi": "3.0.0", "paths": {"/a": 1}}')
    out = io.StringIO()
    with pytest.raises(CommandError, match="previous version keeps serving"):
        call_command("gateway", "apply", "-f", str(config_file), stdout=out)
    assert "spec acme/pets v2: failed with" in out.getvalue()
    assert "  /info: " in out.getvalue() or "  /paths/~1a: " in out.getvalue()
    assert Backend.objects.get(name="pets").active_spec.number == 1


def test_compile_options_apply_and_export(folder: Path, django_capture_on_commit_callbacks) -> None:
    document = DOCUMENT.replace("    timeout_seconds: 5\n", "    timeout_seconds: 5\n    tool_name_max_length: 8\n"
                                "    include_deprecated: true\n")
    with django_capture_on_commit_callbacks(execute=True):
        config_apply(document=document, prune=False, base_dir=folder)
    backend = Backend.objects.get(name="pets")
    assert (backend.tool_name_max_length, backend.include_deprecated) == (8, True)
    assert max(len(name) for name in Tool.objects.filter(backend=backend).values_list("name", flat=True)) == 8
    exported = config_export()
    assert "tool_name_max_length: 8" in exported and "include_deprecated: true" in exported
    assert not config_apply(document=exported, prune=False).changed
    with pytest.raises(ConfigInvalid, match="from 1 to 128"):
        config_apply(document=document.replace("tool_name_max_length: 8", "tool_name_max_length: 129"),
                     prune=False, base_dir=folder)


def test_an_export_applied_with_prune_keeps_the_credential_and_null_removes_it(folder: Path) -> None:
    config_apply(document=DOCUMENT, prune=False, base_dir=folder)
    report = config_apply(document=config_export(), prune=True)
    assert not report.changed
    assert Backend.objects.get(name="pets").credential.kind == "bearer"
    removed = config_apply(document=DOCUMENT.replace("{kind: bearer, secret_env: PETS_TOKEN}", "null"),
                           prune=False, base_dir=folder)
    assert [c.detail for c in removed.changes if c.kind == "backend"] == ["credential removed"]
    assert not hasattr(Backend.objects.get(name="pets"), "credential")


# --- The removal guard: `allow_removals` on the backend, `--allow-removals` on the command ------------

def _empty_spec() -> bytes:
    empty = service_spec()
    empty["paths"] = {}
    return as_json(empty)


def test_a_spec_removing_most_tools_is_held_until_applied_again_with_allow_removals(
    folder: Path, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        config_apply(document=DOCUMENT, prune=False, base_dir=folder)
    (folder / "specs" / "pets.json").write_bytes(_empty_spec())
    with django_capture_on_commit_callbacks(execute=True):
        held = config_apply(document=DOCUMENT, prune=False, base_dir=folder)
    backend = Backend.objects.get(name="pets")
    version = SpecVersion.objects.get(pk=held.spec_versions[0])
    assert version.status == SpecVersion.Status.HELD and backend.active_spec.number == 1
    assert Tool.objects.filter(backend=backend).count() == 13
    # The same file again without the flag: still held, and said again (not a silent success).
    with django_capture_on_commit_callbacks(execute=True):
        again = config_apply(document=DOCUMENT, prune=False, base_dir=folder)
    assert again.spec_versions == (version.pk,) and SpecVersion.objects.filter(backend=backend).count() == 2
    # The same file again, now allowed (the flag of the command): the held version is published.
    with django_capture_on_commit_callbacks(execute=True):
        allowed = config_apply(document=DOCUMENT, prune=False, base_dir=folder, allow_removals=True)
    assert [c.detail for c in allowed.changes if c.kind == "backend"] == ["held spec v2 published"]
    assert allowed.spec_versions == (version.pk,)
    backend.refresh_from_db()
    assert backend.active_spec.number == 2 and not Tool.objects.filter(backend=backend).exists()


def test_allow_removals_on_the_backend_publishes_at_once(folder: Path, django_capture_on_commit_callbacks) -> None:
    document = DOCUMENT.replace("    timeout_seconds: 5\n", "    timeout_seconds: 5\n    allow_removals: true\n")
    with django_capture_on_commit_callbacks(execute=True):
        config_apply(document=document, prune=False, base_dir=folder)
    (folder / "specs" / "pets.json").write_bytes(_empty_spec())
    with django_capture_on_commit_callbacks(execute=True):
        config_apply(document=document, prune=False, base_dir=folder)
    backend = Backend.objects.get(name="pets")
    assert backend.active_spec.number == 2 and backend.active_spec.allow_removals
    assert not Tool.objects.filter(backend=backend).exists()


def test_a_bad_allow_removals_is_a_problem(folder: Path) -> None:
    document = DOCUMENT.replace("    timeout_seconds: 5\n", "    timeout_seconds: 5\n    allow_removals: yes please\n")
    with pytest.raises(ConfigInvalid) as caught:
        config_apply(document=document, prune=False, base_dir=folder)
    assert [(p.path, p.message) for p in caught.value.problems] == [
        ("backends[0].allow_removals", "must be true or false")]
    mcp = DOCUMENT.replace("kind: openapi", "kind: mcp").replace("    spec: specs/pets.json\n", "    allow_removals: true\n")
    with pytest.raises(ConfigInvalid) as caught:
        config_apply(document=mcp, prune=False, base_dir=folder)
    assert any(p.path == "backends[0].allow_removals" and "only OpenAPI backends" in p.message
               for p in caught.value.problems), caught.value.problems


@pytest.mark.django_db(transaction=True)
def test_the_command_says_a_spec_was_held_and_allow_removals_publishes_it(folder: Path) -> None:
    config_file = folder / "gateway.yaml"
    config_file.write_text(DOCUMENT, encoding="utf-8")
    call_command("gateway", "apply", "-f", str(config_file), stdout=io.StringIO())
    (folder / "specs" / "pets.json").write_bytes(_empty_spec())
    out = io.StringIO()
    with pytest.raises(CommandError, match="was held: it would remove more than half"):
        call_command("gateway", "apply", "-f", str(config_file), stdout=out)
    assert ("spec acme/pets v2: held, not published: it would remove 13 of the 13 tools served; the previous "
            "version keeps serving. To publish it, apply again with --allow-removals") in out.getvalue()
    assert "  removed: getPet" in out.getvalue()
    assert Backend.objects.get(name="pets").active_spec.number == 1
    out = io.StringIO()
    call_command("gateway", "apply", "-f", str(config_file), "--allow-removals", stdout=out)
    assert "spec acme/pets v2: ready, 0 tools (+0 -13 ~0)" in out.getvalue()
    assert Backend.objects.get(name="pets").active_spec.number == 2
