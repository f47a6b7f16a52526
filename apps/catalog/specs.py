"""OpenAPI backends: spec uploads and their compilation into tools.

An upload is stored as a `pending` spec version and compiled by a Celery task after commit, where
the document is also checked against the rules of its OpenAPI version (`openapi/conformance.py`). A
compile publishes in one transaction (tool rows, the backend's `active_spec`, the configuration
version), so the gateway serves either the previous tools or all of the new ones; a failed compile
publishes nothing and the previous version keeps serving. A version that would remove more than
half of the tools served is `held` (compiled, not published) unless its upload allowed removals;
`spec_version_publish` publishes it anyway. `spec_version_rollback` serves an earlier version's
document again, as a new version, through the same path."""

from __future__ import annotations

import datetime
import hashlib
import logging
import time
from collections.abc import Iterable

import orjson
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Max, Q
from django.utils import timezone

from apps.catalog.models import Backend, SpecVersion, Tool
from apps.catalog.openapi import CompileOptions, CompileResult, Problem, compile_spec
from apps.catalog.openapi.conformance import Conformance, spec_conformance
from apps.catalog.openapi.model import CompiledTool
from apps.catalog.openapi.records import json_safe, tool_fingerprint, tool_record
from apps.common.config_version import config_version_bump
from apps.common.list_changes import list_changed_announce
from apps.common.url_guard import url_address_validate
from apps.retrieval.indexing import tool_index_queue

log = logging.getLogger(__name__)

#: A version `compiling` for longer than this is taken to belong to a worker that died (EC2's
#: 765 tools compile and publish in about a second).
COMPILE_STALE_SECONDS = 600
#: A version that would remove more than this share of the tools a backend serves is held, not
#: published, unless its upload allows removals (an empty `paths` would silently remove them all).
REMOVAL_GUARD_SHARE = 0.5


def _clean(text: str) -> str:
    """PostgreSQL's text and jsonb refuse NUL characters, which a hostile spec may carry."""
    return text.replace("\x00", "\ufffd")


def _problems(problems: Iterable[Problem]) -> list[dict[str, str]]:
    return [{"pointer": _clean(p.pointer), "message": _clean(p.message)} for p in problems]


def spec_upload(
    *, backend: Backend, document: bytes, filename: str = "", uploaded_by: str = "", allow_removals: bool = False,
    restores: int | None = None,
) -> SpecVersion:
    """Store `document` as the backend's next spec version (`pending`) and queue its compilation
    once the transaction commits. `allow_removals` publishes it even when it removes more than
    REMOVAL_GUARD_SHARE of the tools served; `restores` is the number of the version whose document
    this is (a rollback). Refused (ValidationError) for non-OpenAPI backends, empty or oversized
    documents; nothing is stored then."""
    if backend.kind != Backend.Kind.OPENAPI:
        raise ValidationError(f"backend {backend.name!r} is an MCP server; only OpenAPI backends take a spec")
    if not document.strip():
        raise ValidationError("the document is empty")
    limit = settings.GATEWAY_SPEC_MAX_BYTES
    if len(document) > limit:
        raise ValidationError(f"the document has {len(document):,} bytes; the limit is {limit:,}")
    with transaction.atomic():
        # Numbers are per backend: lock it so two uploads cannot take the same one.
        Backend.objects.select_for_update().filter(pk=backend.pk).first()
        latest = backend.spec_versions.aggregate(latest=Max("number"))["latest"] or 0
        version = SpecVersion.objects.create(
            backend=backend,
            number=latest + 1,
            filename=filename[:255],
            document=document,
            sha256=hashlib.sha256(document).hexdigest(),
            size=len(document),
            uploaded_by=uploaded_by[:200],
            allow_removals=allow_removals,
            restores=restores,
        )
        transaction.on_commit(lambda: _queue(version.pk))
    return version


def spec_recompile(*, backend: Backend, reason: str) -> SpecVersion | None:
    """Compile the active version's document again as a new version (the compile options
    changed). None when the backend serves no spec yet. Published whatever it removes: changing
    the options (a shorter name limit renames tools) is the confirmation. It restores the active
    version's document, so rules of the standard it was accepted without only warn (`_findings`)."""
    active = backend.active_spec
    if active is None:
        return None
    return spec_upload(backend=backend, document=bytes(active.document), filename=active.filename, uploaded_by=reason,
                       allow_removals=True, restores=active.number)


def spec_version_publish(*, backend: Backend, number: int) -> SpecVersion:
    """Publish held version `number` anyway: it is compiled again (after commit, by a worker) and
    published whatever it removes. Refused (ValidationError) when it is not held, or when a later
    version has been published since (upload the document again to serve it)."""
    with transaction.atomic():
        locked = Backend.objects.select_for_update().get(pk=backend.pk)
        version = SpecVersion.objects.filter(backend=locked, number=number).defer("document").first()
        if version is None:
            raise ValidationError(f"backend {backend.name!r} has no spec version {number}")
        if version.status != SpecVersion.Status.HELD:
            raise ValidationError(f"version {number} is {version.status}: only a held version waits to be published")
        active = locked.active_spec
        if active is not None and active.number > number:
            raise ValidationError(
                f"version {active.number} has been published since version {number} was held; "
                f"upload the document again to serve it")
        SpecVersion.objects.filter(pk=version.pk).update(
            status=SpecVersion.Status.PENDING, allow_removals=True, started_at=None)
        transaction.on_commit(lambda: _queue(version.pk))
    version.refresh_from_db()
    return version


def spec_version_rollback(*, backend: Backend, number: int, uploaded_by: str = "") -> SpecVersion:
    """Serve ready version `number` again: its document is uploaded as the backend's next version
    (which `restores` it), compiled with the backend's current options and published whatever it
    removes — the rollback is the confirmation — like any upload, so the configuration version
    moves and the gateways serve its tools. The standard's findings on it are warnings: it was
    accepted once. Refused (ValidationError) unless the version is ready and not the one served."""
    source = SpecVersion.objects.filter(backend=backend, number=number).first()
    if source is None:
        raise ValidationError(f"backend {backend.name!r} has no spec version {number}")
    if source.status != SpecVersion.Status.READY:
        raise ValidationError(f"version {number} is {source.status}: only a version that compiled (ready) can be "
                              f"rolled back to")
    if backend.active_spec_id == source.pk:
        raise ValidationError(f"version {number} is the version being served")
    return spec_upload(backend=backend, document=bytes(source.document), filename=source.filename,
                       uploaded_by=uploaded_by, allow_removals=True, restores=number)


def spec_version_compile(*, spec_version_id: int) -> SpecVersion | None:
    """Compile a spec version and publish its tools, or record why it failed. Exactly one worker
    compiles a version: it claims it while `pending` (or `compiling` for longer than
    COMPILE_STALE_SECONDS, after a worker died); any other call returns the version as it is.
    Whatever goes wrong ends in `failed` with a message, never in `compiling` for good. None if
    the version is gone."""
    now = timezone.now()
    stale = now - datetime.timedelta(seconds=COMPILE_STALE_SECONDS)
    claimed = (
        SpecVersion.objects.filter(pk=spec_version_id)
        .filter(Q(status=SpecVersion.Status.PENDING) | Q(status=SpecVersion.Status.COMPILING, started_at__lt=stale))
        .update(status=SpecVersion.Status.COMPILING, started_at=now)
    )
    version = SpecVersion.objects.filter(pk=spec_version_id).select_related("backend").first()
    if not claimed or version is None:
        return version
    try:
        _compile(version)
    except Exception as exc:  # a bug or a value the database refuses: fail the version, keep serving
        log.exception("compiling spec version %s failed", version.pk)
        version.status = SpecVersion.Status.FAILED
        version.errors = [{"pointer": "", "message": f"internal error: {type(exc).__name__}: {_clean(str(exc))}"}]
        version.compiled_at = timezone.now()
        version.save()
    return version


def _compile(version: SpecVersion) -> None:
    options = CompileOptions(
        max_bytes=settings.GATEWAY_SPEC_MAX_BYTES,
        max_name_length=version.backend.tool_name_max_length,
        include_deprecated=version.backend.include_deprecated,
    )
    document = bytes(version.document)
    result = compile_spec(document, options=options)
    conformance = spec_conformance(document, max_bytes=options.max_bytes) if result.spec_version else Conformance()
    errors, warnings = _findings(result, conformance, restoring=version.restores is not None)
    version.title = _clean(result.title[:255])
    version.api_version = _clean(result.version[:64])
    version.openapi_version = result.spec_version
    version.warnings = _problems(warnings)
    version.compiled_at = timezone.now()
    if errors:
        version.status = SpecVersion.Status.FAILED
        version.errors = _problems(errors)
        version.save()
        return
    if not version.backend.base_url:  # the spec's servers are where its tools' requests go
        refused = _servers_refused(result.tools, allow_private=version.backend.tenant.private_networks_allowed)
        if refused:
            version.status = SpecVersion.Status.FAILED
            version.errors = refused
            version.save()
            return
    version.security_schemes = [
        {"name": _clean(s.name), "kind": s.kind, "parameter": _clean(s.parameter)} for s in result.security
    ]
    records = [tool_record(tool) for tool in result.tools]
    try:
        _publish(version, records)
    except orjson.JSONEncodeError:  # orjson refuses integers beyond 64 bits, which YAML documents can carry
        version.warnings.append({"pointer": "", "message": "integers beyond 64 bits were stored as floating point"})
        _publish(version, json_safe(records))


def _findings(result: CompileResult, conformance: Conformance, *, restoring: bool) -> tuple[list[Problem], list[Problem]]:
    """The compiler's errors and warnings, then the standard's findings at places the compiler has
    not reported on already (with at least the same severity; the whole document is no place). A
    restored document's findings of the standard are warnings: it was accepted once."""
    compiler_errors = {p.pointer for p in result.errors if p.pointer}
    reported = compiler_errors | {p.pointer for p in result.warnings if p.pointer}
    errors = [p for p in conformance.errors if p.pointer not in compiler_errors]
    warnings = [p for p in conformance.warnings if p.pointer not in reported]
    if restoring:
        errors, warnings = [], errors + warnings
    return [*result.errors, *errors], [*result.warnings, *warnings]


def _servers_refused(tools: Iterable[CompiledTool], *, allow_private: bool) -> list[dict[str, str]]:
    """A problem for each server URL the tools would be called at that the SSRF guard refuses
    (relative ones need the backend's base URL, which is checked when it is set)."""
    problems: list[dict[str, str]] = []
    for server in sorted({tool.binding.servers[0] for tool in tools if tool.binding.servers}):
        if "://" not in server:
            continue
        try:
            url_address_validate(server, allow_private=allow_private)
        except ValidationError as exc:
            problems.append({"pointer": "/servers", "message": _clean(
                f"{exc.messages[0]}; set the backend's base URL to where the service is reached"
            )})
    return problems


def spec_versions_requeue() -> int:
    """Queue the compilation of every version left behind: `pending` for over a minute (the
    queueing failed, or no worker ran) or `compiling` past COMPILE_STALE_SECONDS (its worker
    died). Returns how many were queued. Run periodically (Celery beat)."""
    now = timezone.now()
    stuck = SpecVersion.objects.filter(
        Q(status=SpecVersion.Status.PENDING, created_at__lt=now - datetime.timedelta(seconds=60))
        | Q(status=SpecVersion.Status.COMPILING, started_at__lt=now - datetime.timedelta(seconds=COMPILE_STALE_SECONDS))
    ).values_list("pk", flat=True)
    ids = list(stuck)
    for version_id in ids:
        _queue(version_id)
    return len(ids)


def _queue(spec_version_id: int) -> None:
    from apps.catalog.tasks import spec_compile  # the task module imports this one

    try:
        spec_compile.delay(spec_version_id)
    except Exception:  # the broker is down: the upload stands, the periodic sweep queues it later
        log.warning("could not queue the compilation of spec version %s", spec_version_id, exc_info=True)


@transaction.atomic
def _publish(version: SpecVersion, records: list[dict]) -> None:
    backend = Backend.objects.select_for_update().get(pk=version.backend_id)
    active = backend.active_spec
    if active is not None and active.number > version.number:
        # A later upload was published first: this one must not replace it.
        version.status = SpecVersion.Status.READY
        version.tool_count = len(records)
        version.changes = {"superseded_by": active.number}
        version.save()
        return
    before = dict(Tool.objects.filter(backend=backend).values_list("name", "fingerprint"))
    after = {record["name"]: tool_fingerprint(record) for record in records}
    version.tool_count = len(records)
    version.changes = {
        "added": sorted(after.keys() - before.keys()),
        "removed": sorted(before.keys() - after.keys()),
        "changed": sorted(name for name in after.keys() & before.keys() if after[name] != before[name]),
    }
    if not version.allow_removals and len(version.changes["removed"]) > REMOVAL_GUARD_SHARE * len(before):
        # Compiled, not published: `served` says of how many tools `removed` would have taken.
        version.status = SpecVersion.Status.HELD
        version.changes["served"] = len(before)
        version.save()
        return
    Tool.objects.filter(backend=backend).delete()
    _tools_insert(backend=backend, version=version, records=records, fingerprints=after)
    version.status = SpecVersion.Status.READY
    version.save()
    backend.active_spec = version
    backend.save(update_fields=["active_spec", "updated_at"])
    config_version_bump(tenant_id=backend.tenant_id)
    tool_index_queue(backend_id=backend.pk)  # incremental: unchanged tools keep their entries
    if any(version.changes.values()):
        # Clients of multi-backend hosts hear it (`tools/list_changed`) from whichever instance they are on.
        list_changed_announce(backend_id=backend.pk, notification="notifications/tools/list_changed")


_TOOL_COLUMNS = (
    "backend_id", "spec_version_id", "name", "description", "input_schema", "output_schema", "annotations",
    "binding", "operation_id", "pointer", "fingerprint", "tags",
)


def _tools_insert(
    *, backend: Backend, version: SpecVersion, records: list[dict], fingerprints: dict[str, str]
) -> None:
    """Insert the tool rows with COPY: an ORM bulk insert quotes megabytes of schema JSON on the
    client, ~3 s for EC2's 765 tools against a fraction of a second here."""
    table = connection.ops.quote_name(Tool._meta.db_table)

    def json_text(value: object) -> str | None:
        return None if value is None else orjson.dumps(value).decode().replace("\\u0000", "\\ufffd")

    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {table} ({', '.join(_TOOL_COLUMNS)}) FROM STDIN") as copy:
        for record in records:
            copy.write_row((
                backend.pk, version.pk, _clean(record["name"]), _clean(record["description"]),
                json_text(record["input_schema"]), json_text(record["output_schema"]),
                json_text(record["annotations"]), json_text(record["binding"]),
                _clean(record["operation_id"] or ""), _clean(record["pointer"]), fingerprints[record["name"]],
                json_text([_clean(tag) for tag in record.get("tags", ())]),
            ))


def spec_versions_wait(*, ids: Iterable[int], timeout: float, poll: float = 0.2) -> list[SpecVersion]:
    """The spec versions, once each is `ready`, `held` or `failed`, or as they are when `timeout` passes."""
    ids = list(ids)
    deadline = time.monotonic() + timeout
    while True:
        versions = list(SpecVersion.objects.filter(pk__in=ids).select_related("backend__tenant").order_by("pk"))
        done = all(v.status in (SpecVersion.Status.READY, SpecVersion.Status.HELD, SpecVersion.Status.FAILED)
                   for v in versions)
        if done or time.monotonic() >= deadline:
            return versions
        time.sleep(poll)
