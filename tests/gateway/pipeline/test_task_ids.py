"""Task ids on a host with several backends: shown under a signed name that routes back to the
backend that runs the task, on this host and for this caller only; and every place a backend names
a task is shown so, in both eras (2025-11-25 tasks and the 2026-07-28 extension)."""

from __future__ import annotations

from apps.gateway.pipeline.compose import BackendMessages, with_related_task
from apps.gateway.pipeline.task_ids import MAX_ID, RELATED_TASK, TaskIds
from apps.kernel.names import Naming

IDS = TaskIds(b"s" * 32)


def test_an_exposed_id_routes_back_on_its_host_and_for_its_caller_only() -> None:
    exposed = IDS.expose(1, "main", 7, "ev", "task/ü 1")
    assert exposed.startswith("gwt.") and "ev" not in exposed
    assert IDS.route(1, "main", 7, exposed) == ("ev", "task/ü 1")
    assert TaskIds(b"s" * 32).route(1, "main", 7, exposed) == ("ev", "task/ü 1")  # another instance
    for tenant, host, caller, token in (
        (2, "main", 7, exposed), (1, "other", 7, exposed), (1, "main", 8, exposed), (1, "main", 7, exposed[:-1] + "A"),
        (1, "main", 7, "gwt.x.y"), (1, "main", 7, "plain"), (1, "main", 7, 7), (1, "main", 7, "gwt." * MAX_ID),
    ):
        assert IDS.route(tenant, host, caller, token) is None, (tenant, host, caller, token)
    assert TaskIds(b"t" * 32).route(1, "main", 7, exposed) is None  # another deployment's secret


def _shown() -> BackendMessages:
    naming = Naming.build(["ev", "demo"], {})
    return BackendMessages(naming, "ev", lambda _: None, tasks=lambda upstream: f"[{upstream}]")


def test_every_task_id_a_backend_sends_is_shown_under_the_hosts_name() -> None:
    shown = _shown()
    task = {"taskId": "t1", "status": "working", "ttl": None, "createdAt": "now", "lastUpdatedAt": "now"}
    assert shown({"jsonrpc": "2.0", "id": 1, "result": {"task": task}})["result"]["task"]["taskId"] == "[t1]"
    assert shown({"jsonrpc": "2.0", "id": 1, "result": task})["result"]["taskId"] == "[t1]"
    listed = shown({"jsonrpc": "2.0", "id": 1, "result": {"tasks": [task, {**task, "taskId": "t2"}]}})
    assert [t["taskId"] for t in listed["result"]["tasks"]] == ["[t1]", "[t2]"]
    status = shown({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task})
    assert status["params"]["taskId"] == "[t1]"
    related = {"content": [], "_meta": {RELATED_TASK: {"taskId": "t1"}, "other": 1}}
    assert shown({"jsonrpc": "2.0", "id": 1, "result": related})["result"]["_meta"] == {
        RELATED_TASK: {"taskId": "[t1]"}, "other": 1}
    plain = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "taskId"}]}}
    assert shown(plain) is plain  # nothing that names a task: the same message


def test_the_extensions_tasks_are_shown_with_their_inlined_results_in_the_hosts_terms() -> None:
    """2026-07-28: a flat CreateTaskResult, a DetailedTask whose result is inlined (its resource
    links too), and `notifications/tasks` on a listen stream."""
    shown = _shown()
    created = {"resultType": "task", "taskId": "t1", "status": "working", "createdAt": "a", "lastUpdatedAt": "a",
               "ttlMs": 60000}
    assert shown({"jsonrpc": "2.0", "id": 1, "result": created})["result"] == {**created, "taskId": "[t1]"}
    link = {"type": "resource_link", "name": "r", "uri": "file:///r.txt"}
    done = {"resultType": "complete", "taskId": "t1", "status": "completed", "createdAt": "a", "lastUpdatedAt": "b",
            "ttlMs": None, "result": {"content": [link], "isError": False}}
    detailed = shown({"jsonrpc": "2.0", "id": 2, "result": done})["result"]
    assert detailed["taskId"] == "[t1]"
    assert detailed["result"]["content"][0]["uri"] == Naming.build(["ev", "demo"], {}).expose_uri("ev", "file:///r.txt")
    notified = shown({"jsonrpc": "2.0", "method": "notifications/tasks", "params": done})["params"]
    assert (notified["taskId"], notified["result"]["content"][0]["uri"]) == ("[t1]", detailed["result"]["content"][0]["uri"])


def test_a_clients_answer_names_its_task_in_the_backends_terms_again() -> None:
    answer = {"jsonrpc": "2.0", "id": 3, "result": {"action": "accept", "_meta": {RELATED_TASK: {"taskId": "[t1]"}}}}
    upstream = with_related_task(answer, lambda exposed: exposed.strip("[]") if exposed.startswith("[") else None)
    assert upstream["result"]["_meta"][RELATED_TASK] == {"taskId": "t1"}
    assert answer["result"]["_meta"][RELATED_TASK] == {"taskId": "[t1]"}  # the client's message is left alone
    foreign = {"jsonrpc": "2.0", "id": 3, "result": {"_meta": {RELATED_TASK: {"taskId": "other"}}}}
    assert with_related_task(foreign, lambda exposed: None) is foreign
