"""The batched writer: every model column is written, and a failed batch stays queued."""

from __future__ import annotations

import time

import pytest

from apps.audit.models import AuditMinute, AuditRecord
from apps.audit.writer import _COLUMNS, AuditWriter, audit_records_write, audit_tasks_end
from apps.kernel.audit_entry import AuditEntry, TaskEnd
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
    """Every column but the one only a task's end sets (`audit_tasks_end`)."""
    columns = {field.column for field in AuditRecord._meta.concrete_fields if not field.primary_key}
    assert set(_COLUMNS) == columns - {"task_ended_at"}


@pytest.mark.django_db
def test_rows_are_written_as_given() -> None:
    audit_records_write([_entry(), _entry(outcome="error", error_code=-32004, exposed_name="x" * 300)])
    ok, failed = AuditRecord.objects.order_by("id")
    assert (ok.tenant_id, ok.tenant_slug, ok.principal, ok.api_key_id, ok.exposed_name, ok.upstream_name) == (
        7, "acme", "key:agent", 3, "a-add", "add")
    assert (ok.latency_ms, ok.bytes_in, ok.bytes_out, ok.trace_id, ok.error_code) == (1.5, 10, 20, "t" * 32, None)
    assert (failed.outcome, failed.error_code, len(failed.exposed_name)) == ("error", -32004, 255)


@pytest.mark.django_db
def test_a_console_call_is_written_with_its_origin_and_user_and_a_test_identity_with_no_key() -> None:
    from dataclasses import replace

    tried = replace(PRINCIPAL, console_user="alice")
    identity = Principal(tenant_id=7, tenant_slug="acme", key_id=-(2**62) - 5, key_name="console:alice", team=None,
                         console_user="alice")
    audit_records_write([_entry(), _entry(principal=tried), _entry(principal=identity)])
    rows = AuditRecord.objects.order_by("id").values_list("origin", "console_user", "principal", "api_key_id")
    assert list(rows) == [("mcp", "", "key:agent", 3), ("console", "alice", "key:agent", 3),
                          ("console", "alice", "key:console:alice", None)]


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


def _end(task_id: str = "t-1", outcome: str = "ok", code: int | None = None, **changes: object) -> TaskEnd:
    values: dict[str, object] = dict(tenant_id=7, virtual_host="main", backend="demo", task_id=task_id,
                                     outcome=outcome, error_code=code, at=time.time())
    values.update(changes)
    return TaskEnd(**values)  # type: ignore[arg-type]


def _errors_counted() -> dict[str, int]:
    return {row.tool: row.errors for row in AuditMinute.objects.filter(tenant_id=7)}


@pytest.mark.django_db
def test_a_tasks_end_gives_the_row_of_its_call_the_final_outcome_and_counts_its_error() -> None:
    audit_records_write([_entry(outcome="working", task_id="t-1"), _entry(outcome="working", task_id="t-2"),
                         _entry(outcome="working", task_id="t-1", backend="other")])
    assert _errors_counted() == {"": 0, "a-add": 0}
    assert audit_tasks_end([_end("t-1", "tool_error"), _end("t-2", "cancelled")]) == []
    rows = {(row.backend, row.task_id): row for row in AuditRecord.objects.all()}
    assert (rows["demo", "t-1"].outcome, rows["demo", "t-2"].outcome, rows["other", "t-1"].outcome) == (
        "tool_error", "cancelled", "working")  # another backend's task of the same id is another task
    assert rows["demo", "t-1"].task_ended_at is not None and rows["other", "t-1"].task_ended_at is None
    assert AuditRecord.objects.count() == 3  # one row per task: ended, not added
    assert _errors_counted() == {"": 1, "a-add": 1}


@pytest.mark.django_db
def test_a_task_id_a_backend_gave_again_ends_the_newest_calls_row() -> None:
    """A backend that restarted and counts its ids from 1 again: the end is the new task's."""
    audit_records_write([_entry(outcome="working", task_id="1", at=time.time() - 3600)])
    audit_records_write([_entry(outcome="working", task_id="1")])
    audit_tasks_end([_end("1", "ok")])
    assert [row.outcome for row in AuditRecord.objects.order_by("created_at")] == ["working", "ok"]


@pytest.mark.django_db
def test_an_end_without_a_task_id_is_passed_over() -> None:
    audit_records_write([_entry(outcome="ok"), _entry(outcome="working", task_id="t-1")])
    assert audit_tasks_end([_end("", "error", -32000), _end("t-1", "error", None)]) == []
    assert sorted(row.outcome for row in AuditRecord.objects.all()) == ["error", "ok"]


@pytest.mark.django_db
def test_an_ended_task_keeps_its_outcome_unless_it_only_said_it_failed() -> None:
    """A 2025-11-25 `failed` status (an error with no code) is refined by what `tasks/result` says
    later; anything else that comes after the end changes nothing, and an error is counted once."""
    audit_records_write([_entry(outcome="working", task_id="t-1"), _entry(outcome="working", task_id="t-2")])
    audit_tasks_end([_end("t-1", "error"), _end("t-2", "ok")])
    audit_tasks_end([_end("t-1", "error", -32000), _end("t-2", "error", -32603)])
    rows = {row.task_id: row for row in AuditRecord.objects.all()}
    assert (rows["t-1"].outcome, rows["t-1"].error_code) == ("error", -32000)
    assert (rows["t-2"].outcome, rows["t-2"].error_code) == ("ok", None)
    audit_tasks_end([_end("t-1", "tool_error")])
    assert AuditRecord.objects.get(task_id="t-1").error_code == -32000
    assert _errors_counted() == {"": 1, "a-add": 1}


@pytest.mark.django_db(transaction=True)  # the writer manages its own connection, as in production
def test_an_end_that_comes_before_its_row_waits_for_it_a_bounded_number_of_flushes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The call's row is another instance's to write: the end seen here first finds no row."""
    monkeypatch.setattr("apps.audit.writer._TASK_END_TRIES", 3)
    writer = AuditWriter(interval=3600)
    writer._ends.extend([(_end("t-1", "ok"), 0), (_end("never", "ok"), 0)])
    writer.flush_sync()
    assert [end.task_id for end, _ in writer._ends] == ["t-1", "never"]
    audit_records_write([_entry(outcome="working", task_id="t-1")])  # the other instance's flush
    writer.flush_sync()
    assert AuditRecord.objects.get().outcome == "ok"
    assert [(end.task_id, tries) for end, tries in writer._ends] == [("never", 2)]
    writer.flush_sync()
    assert not writer._ends  # given up
    monkeypatch.setattr("apps.audit.writer.AuditWriter._wake", lambda self: None)
    writer.task_ended(_end("never", "ok"))  # a later poll that shows the end: tried again
    assert [end.task_id for end, _ in writer._ends] == ["never"]
    writer._ends.clear()


@pytest.mark.django_db(transaction=True)
def test_an_end_seen_again_is_queued_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("apps.audit.writer.AuditWriter._wake", lambda self: None)
    writer = AuditWriter(interval=3600)
    for _ in range(3):  # every tasks/get of an ended task shows the same end
        writer.task_ended(_end("t-1", "ok", at=time.time()))
    writer.task_ended(_end("t-1", "error", -32000))
    assert [(end.outcome, tries) for end, tries in writer._ends] == [("ok", 0), ("error", 0)]
    writer._ends.clear()  # nothing for its exit-time flush to write once the test database is gone
