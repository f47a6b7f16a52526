"""The batched writer: every model column is written, and a failed batch stays queued."""

from __future__ import annotations

import time

import pytest

from apps.audit.models import AuditRecord
from apps.audit.writer import _COLUMNS, AuditWriter, audit_records_write
from apps.kernel.audit_entry import AuditEntry
from apps.kernel.identity import Principal

PRINCIPAL = Principal(tenant_id=7, tenant_slug="acme", key_id=3, key_name="agent", team="platform")


def _entry(**changes: object) -> AuditEntry:
    values: dict[str, object] = dict(
        principal=PRINCIPAL, virtual_host="main", backend="demo", method="tools/call", exposed_name="a-add",
        upstream_name="add", outcome="ok", error_code=None, latency_ms=1.5, bytes_in=10, bytes_out=20,
        session_id="s", trace_id="t" * 32, at=time.time(),
    )
    values.update(changes)
    return AuditEntry(**values)  # type: ignore[arg-type]


def test_the_copy_covers_every_column() -> None:
    columns = {field.column for field in AuditRecord._meta.concrete_fields if not field.primary_key}
    assert set(_COLUMNS) == columns


@pytest.mark.django_db
def test_rows_are_written_as_given() -> None:
    audit_records_write([_entry(), _entry(outcome="error", error_code=-32004, exposed_name="x" * 300)])
    ok, failed = AuditRecord.objects.order_by("id")
    assert (ok.tenant_id, ok.tenant_slug, ok.principal, ok.api_key_id, ok.exposed_name, ok.upstream_name) == (
        7, "acme", "key:agent", 3, "a-add", "add")
    assert (ok.latency_ms, ok.bytes_in, ok.bytes_out, ok.trace_id, ok.error_code) == (1.5, 10, 20, "t" * 32, None)
    assert (failed.outcome, failed.error_code, len(failed.exposed_name)) == ("error", -32004, 255)


@pytest.mark.django_db(transaction=True)  # the writer manages its own connection, as in production
def test_a_failed_batch_stays_queued_for_the_next_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    writer = AuditWriter(interval=3600)
    writer._queue.extend([_entry(), _entry()])
    calls: list[int] = []

    def broken(batch: list[AuditEntry]) -> None:
        calls.append(len(batch))
        raise RuntimeError("database down")

    monkeypatch.setattr("apps.audit.writer.audit_records_write", broken)
    writer.flush_sync()
    assert calls == [2] and len(writer._queue) == 2
    monkeypatch.undo()
    writer.flush_sync()
    assert not writer._queue and AuditRecord.objects.count() == 2


@pytest.mark.django_db
def test_names_a_caller_chose_are_stored_whatever_they_hold() -> None:
    audit_records_write([_entry(exposed_name="a\x00b", method="tools/\x00call", session_id="s\x00")])
    row = AuditRecord.objects.get()
    assert (row.exposed_name, row.method, row.session_id) == ("a\ufffdb", "tools/\ufffdcall", "s\ufffd")


@pytest.mark.django_db
def test_kept_arguments_policy_rule_and_limit_state_are_written() -> None:
    token = Principal(tenant_id=7, tenant_slug="acme", key_id=-99, key_name="alice", team=None, issuer="https://i/")
    audit_records_write([
        _entry(arguments={"text": "nul \x00 inside", "n": 1}, rule="r1", limit_state="ok"),
        _entry(principal=token, outcome="denied", error_code=-32003),
    ])
    kept, by_token = AuditRecord.objects.order_by("id")
    assert kept.arguments == {"text": "nul \ufffd inside", "n": 1}  # jsonb cannot hold NUL
    assert (kept.rule, kept.limit_state) == ("r1", "ok")
    assert (by_token.principal, by_token.api_key_id, by_token.arguments) == ("token:alice@https://i/", None, None)
