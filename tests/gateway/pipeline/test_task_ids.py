"""Task ids on a host with several backends: shown under a signed name that routes back to the
backend that runs the task, on this host only; and every place a backend names a task is shown so."""

from __future__ import annotations

from apps.gateway.pipeline.compose import BackendMessages
from apps.gateway.pipeline.task_ids import MAX_ID, RELATED_TASK, TaskIds
from apps.kernel.names import Naming

IDS = TaskIds(b"s" * 32)


def test_an_exposed_id_routes_back_on_its_host_only() -> None:
    exposed = IDS.expose(1, "main", "ev", "task/ü 1")
    assert exposed.startswith("gwt.") and "ev" not in exposed
    assert IDS.route(1, "main", exposed) == ("ev", "task/ü 1")
    assert TaskIds(b"s" * 32).route(1, "main", exposed) == ("ev", "task/ü 1")  # another instance
    for tenant, host, token in ((2, "main", exposed), (1, "other", exposed), (1, "main", exposed[:-1] + "A"),
                                (1, "main", "gwt.x.y"), (1, "main", "plain"), (1, "main", 7), (1, "main", "gwt." * MAX_ID)):
        assert IDS.route(tenant, host, token) is None, (tenant, host, token)
    assert TaskIds(b"t" * 32).route(1, "main", exposed) is None  # another deployment's secret


def test_every_task_id_a_backend_sends_is_shown_under_the_hosts_name() -> None:
    shown = BackendMessages(Naming.build(["ev", "demo"], {}), "ev", lambda _: None,
                            tasks=lambda upstream: f"[{upstream}]")
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
