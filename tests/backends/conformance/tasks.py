"""The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) and its fixture tools.

The SDK ships no tasks implementation, only the extension seams, so the fixture builds
one on them (`TasksExtension`, passed to `MCPServer(extensions=[...])`):

* `tools()` contributes the tools the `tasks-*` scenarios call;
* `methods()` serves `tasks/get`, `tasks/update` and `tasks/cancel`, on the 2026-07-28
  wire only (`tasks/list` and `tasks/result` are gone in v2, so they stay unknown:
  -32601); each refuses with -32021 unless *that request's* `_meta` client
  capabilities declare the extension;
* `intercept_tool_call` decides, server-side, whether a `tools/call` becomes a task;
* `check_task_name_header` (server middleware) checks `Mcp-Name` against
  `params.taskId`, which the SDK validates for tools/prompts/resources only.

When a call becomes a task: only for a tool with task support, on the 2026-07-28 wire,
when the request declares the extension. Then the task is stored first (so `tasks/get`
finds it the moment the `CreateTaskResult` arrives) and the tool runs in the
background, outliving the HTTP exchange that started it. Without the extension a
task-supporting tool runs synchronously, and one whose support is *required* is
refused with -32021. Handshake-era sessions never see tasks: every tool runs there
as a plain call (the v1 `tasks/*` surface of 2025-11-25 is not served).

A task that needs input parks as `input_required` with its questions under
`inputRequests`; `tasks/update` answers them (partially, if the client likes) and
the task resumes once every key is answered. Tools ask through `gather`, which does
this inside a task and falls back to `interaction.ask_all` (a real server->client
request on legacy sessions, an `InputRequiredResult` on 2026-07-28) everywhere else.

Tasks live in memory for `TASK_TTL_MS` after they are created, never less.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from uuid import uuid4

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding, ToolBinding
from mcp.server.mcpserver import Context, require_client_extension
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ElicitResult,
    ErrorData,
    InputRequest,
    InputRequiredResult,
    InputResponse,
    RequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field, TypeAdapter, ValidationError

from .interaction import ask, ask_all, elicit_request, response_matches, text_result

logger = logging.getLogger(__name__)

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
TASK_TTL_MS = 5 * 60 * 1000
POLL_INTERVAL_MS = 500

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[TaskStatus] = frozenset({"completed", "failed", "cancelled"})
ToolOutcome = CallToolResult | InputRequiredResult

_INPUT_RESPONSE: TypeAdapter[InputResponse] = TypeAdapter(InputResponse)


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's client capabilities name the extension (per request on 2026-07-28)."""
    caps = ctx.session.client_capabilities
    return caps is not None and TASKS_EXTENSION in (caps.extensions or {})


# --- one task ------------------------------------------------------------------------


@dataclass
class TaskRecord:
    """A task's state, as `tasks/get` shows it, plus what runs it."""

    task_id: str = field(default_factory=lambda: str(uuid4()))
    status: TaskStatus = "working"
    created_at: datetime = field(default_factory=_now)
    last_updated_at: datetime = field(default_factory=_now)
    result: dict[str, Any] | None = None
    error: ErrorData | None = None
    pending: dict[str, InputRequest] = field(default_factory=dict)
    answers: dict[str, InputResponse] = field(default_factory=dict)
    answered: anyio.Event = field(default_factory=anyio.Event)
    # Entered by the background run; `cancel()` may fire it before or while it runs.
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    @property
    def expires_at(self) -> datetime:
        return self.created_at + timedelta(milliseconds=TASK_TTL_MS)

    def envelope(self) -> dict[str, Any]:
        """The SEP-2663 `Task` fields: flat, `ttlMs`/`pollIntervalMs` in integer ms, no `requestState`."""
        return {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": _iso(self.created_at),
            "lastUpdatedAt": _iso(self.last_updated_at),
            "ttlMs": TASK_TTL_MS,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }

    def created_result(self) -> dict[str, Any]:
        """`CreateTaskResult`: the task itself with `resultType: "task"`, no `task` wrapper."""
        return {"resultType": "task", **self.envelope()}

    def detailed(self) -> dict[str, Any]:
        """`tasks/get`'s DetailedTask: the status decides which of inputRequests/result/error appears.

        The runner adds `resultType: "complete"` to an extension method's result.
        """
        detailed = self.envelope()
        if self.status == "input_required":
            detailed["inputRequests"] = {key: _dump(request) for key, request in self.pending.items()}
        elif self.status == "completed":
            detailed["result"] = self.result
        elif self.status == "failed" and self.error is not None:
            detailed["error"] = _dump(self.error)
        return detailed

    def _set(self, status: TaskStatus) -> None:
        self.status = status
        self.last_updated_at = _now()

    def finish(self, *, result: dict[str, Any] | None = None, error: ErrorData | None = None) -> None:
        if self.status in TERMINAL:  # cancelled meanwhile: the first terminal status stands
            return
        self.result, self.error = result, error
        self.pending.clear()
        self._set("failed" if error is not None else "completed")

    def cancel(self) -> None:
        """Settle as cancelled and stop the run; a terminal task stays as it is (idempotent)."""
        if self.status in TERMINAL:
            return
        self.pending.clear()
        self._set("cancelled")
        self.scope.cancel()

    async def wait_for(self, wanted: Mapping[str, InputRequest]) -> dict[str, InputResponse]:
        """Park as `input_required` until `tasks/update` has answered every key of `wanted`."""
        self.pending, self.answers = dict(wanted), {}
        self._set("input_required")
        while self.pending:
            self.answered = anyio.Event()
            await self.answered.wait()
        return dict(self.answers)

    def answer(self, responses: Mapping[str, Any]) -> None:
        """Take the answers to pending keys. Unknown or already answered keys are ignored, and an
        answer that does not fit its question (an elicitation answered like sampling, say)
        leaves the key pending, as the MRTR helpers do."""
        for key, raw in responses.items():
            request = self.pending.get(key)
            if request is None:
                continue
            try:
                response = _INPUT_RESPONSE.validate_python(raw)
            except ValidationError:
                continue
            if response_matches(request, response):
                self.answers[key] = response
                del self.pending[key]
        if self.status == "input_required" and not self.pending:
            # Back to working the moment nothing is pending, so no tasks/get sees an empty map.
            self._set("working")
        self.answered.set()


# The task whose background run is current: `gather` parks it instead of asking the client.
_CURRENT_TASK: ContextVar[TaskRecord | None] = ContextVar("conformance_current_task", default=None)


async def gather(
    ctx: Context[Any, Any], wanted: Mapping[str, InputRequest]
) -> dict[str, InputResponse] | InputRequiredResult:
    """`ask_all`, except inside a task, where the questions become the task's `inputRequests`."""
    task = _CURRENT_TASK.get()
    if task is None:
        return await ask_all(ctx, wanted)
    return await task.wait_for(wanted)


# --- the fixture tools -----------------------------------------------------------------


def _confirm_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}


def _elicited(answer: object, name: str) -> Any:
    return answer.content.get(name) if isinstance(answer, ElicitResult) and answer.content else None


NAME_REQUEST = elicit_request(
    "What is your name?", {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
)


async def greet(name: str) -> CallToolResult:
    return text_result(f"Hello, {name}!")


async def slow_compute(seconds: float = 1, label: str = "") -> CallToolResult:
    await anyio.sleep(seconds)
    return text_result(f"slow_compute{f' {label}' if label else ''}: done after {seconds:g} s")


async def failing_job() -> CallToolResult:
    await anyio.sleep(1)
    return text_result("failing_job failed on purpose", is_error=True)


async def protocol_error_job() -> CallToolResult:
    await anyio.sleep(0.1)
    # Not a tool result with isError: a JSON-RPC error, which a task reports as `failed`.
    raise MCPError(code=INTERNAL_ERROR, message="protocol_error_job crashed on purpose")


async def confirm_delete(filename: str, ctx: Context[Any, Any]) -> ToolOutcome:
    answers = await gather(ctx, {"confirm": elicit_request(f"Delete {filename}?", _confirm_schema())})
    if isinstance(answers, InputRequiredResult):
        return answers
    answer = answers["confirm"]
    confirmed = isinstance(answer, ElicitResult) and answer.action == "accept" and _elicited(answer, "confirm") is True
    return text_result(f"{filename} {'deleted' if confirmed else 'kept'}")


async def multi_input(ctx: Context[Any, Any]) -> ToolOutcome:
    # Both questions at once, so a task has two keys pending together.
    answers = await gather(ctx, {"name": NAME_REQUEST, "confirm": elicit_request("Proceed?", _confirm_schema())})
    if isinstance(answers, InputRequiredResult):
        return answers
    return text_result(f"name={_elicited(answers['name'], 'name')}, confirmed={_elicited(answers['confirm'], 'confirm')}")


async def tool_with_task(ctx: Context[Any, Any]) -> ToolOutcome:
    # Inside the task the name is already on the request: it was answered by MRTR before
    # the call became a task (see `TaskTool.ask_first`).
    answer = await ask(ctx, "user_name", NAME_REQUEST)
    if isinstance(answer, InputRequiredResult):
        return answer
    await anyio.sleep(0.5)
    return text_result(f"Task finished for {_elicited(answer, 'name')}")


@dataclass(frozen=True)
class TaskTool:
    """A fixture tool and how it relates to tasks.

    `support` None: never a task. "optional": a task when the request declares the
    extension, else synchronous. "required": a task, or -32021 without the extension.
    `ask_first`: questions asked by MRTR (`InputRequiredResult`) before the call
    becomes a task, so the round that carries every answer is the one that returns
    the `CreateTaskResult` (SEP-2663's MRTR -> tasks composition).
    """

    fn: Callable[..., Awaitable[ToolOutcome]]
    description: str
    support: Literal["optional", "required"] | None
    ask_first: Mapping[str, InputRequest] = field(default_factory=dict)


TASK_TOOLS: dict[str, TaskTool] = {
    "greet": TaskTool(greet, "Tasks: sync-only, returns 'Hello, {name}!'", None),
    "slow_compute": TaskTool(slow_compute, "Tasks: sleeps `seconds`, then returns a text result", "optional"),
    "failing_job": TaskTool(failing_job, "Tasks (required): a tool error (isError) after ~1 s", "required"),
    "protocol_error_job": TaskTool(protocol_error_job, "Tasks: ends in a JSON-RPC error (task failed)", "optional"),
    "confirm_delete": TaskTool(confirm_delete, "Tasks: asks one confirmation (elicitation), then completes", "optional"),
    "multi_input": TaskTool(multi_input, "Tasks: asks two elicitations at once, then completes", "optional"),
    "test_tool_with_task": TaskTool(
        tool_with_task,
        "Tasks (required): asks 'user_name' by MRTR, then becomes a task whose result names the user",
        "required",
        ask_first={"user_name": NAME_REQUEST},
    ),
}


# --- the extension ----------------------------------------------------------------------


class TaskIdParams(RequestParams):
    task_id: str


class UpdateTaskParams(TaskIdParams):
    # Raw values: each is checked against the question it answers, unknown keys are ignored.
    input_responses: dict[str, Any] = Field(default_factory=dict)


class TasksExtension(Extension):
    """SEP-2663 tasks on the SDK's extension seams, with an in-memory task store."""

    identifier = TASKS_EXTENSION

    def __init__(self) -> None:
        self._tasks: dict[str, TaskRecord] = {}
        # Strong references: the event loop keeps only weak ones to running tasks.
        self._runs: set[asyncio.Task[None]] = set()

    def tools(self) -> list[ToolBinding]:
        return [
            ToolBinding(tool.fn, kwargs={"name": name, "description": tool.description, "structured_output": False})
            for name, tool in TASK_TOOLS.items()
        ]

    def methods(self) -> list[MethodBinding]:
        modern = frozenset(MODERN_PROTOCOL_VERSIONS)
        return [
            MethodBinding("tasks/get", TaskIdParams, self._get, protocol_versions=modern),
            MethodBinding("tasks/update", UpdateTaskParams, self._update, protocol_versions=modern),
            MethodBinding("tasks/cancel", TaskIdParams, self._cancel, protocol_versions=modern),
        ]

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        tool = TASK_TOOLS.get(params.name)
        if tool is None or tool.support is None or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return await call_next(ctx)
        if not declares_tasks(ctx):
            if tool.support == "required":
                require_client_extension(ctx, TASKS_EXTENSION)  # raises -32021 naming the extension
            return await call_next(ctx)
        given = params.input_responses or {}
        missing = {
            key: request
            for key, request in tool.ask_first.items()
            if key not in given or not response_matches(request, given[key])
        }
        if missing:
            return InputRequiredResult(input_requests=missing)
        task = self._create()  # stored before the answer, so an immediate tasks/get finds it
        # The run outlives this HTTP exchange (whose task group ends with the response), so it
        # gets its own task on the server's event loop (uvicorn: asyncio).
        run = asyncio.get_running_loop().create_task(self._run(task, call_next, ctx))
        self._runs.add(run)
        run.add_done_callback(self._runs.discard)
        return task.created_result()

    async def check_task_name_header(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Server middleware: on 2026-07-28 HTTP, `Mcp-Name` must equal `params.taskId` on tasks/get,
        tasks/update and tasks/cancel (SEP-2663 routing headers), else -32020 (HTTP 400)."""
        headers = getattr(ctx.request, "headers", None)
        if ctx.method in TASK_METHODS and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and headers is not None:
            if decode_header_value(headers.get(MCP_NAME_HEADER)) != (ctx.params or {}).get("taskId"):
                raise MCPError(code=HEADER_MISMATCH, message="Mcp-Name header does not match params.taskId")
        return await call_next(ctx)

    # --- the store -------------------------------------------------------------------

    def _create(self) -> TaskRecord:
        self._expire()
        task = TaskRecord()
        self._tasks[task.task_id] = task
        return task

    def _expire(self) -> None:
        now = _now()
        for task_id, task in list(self._tasks.items()):
            if task.expires_at <= now:
                task.cancel()
                del self._tasks[task_id]

    def _known(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> TaskRecord:
        """The request's task: -32021 first (these methods exist only for declaring clients),
        then -32602 for an id this server does not know (or no longer keeps)."""
        require_client_extension(ctx, TASKS_EXTENSION)
        self._expire()
        task = self._tasks.get(task_id)
        if task is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown task: {task_id!r}", data={"taskId": task_id})
        return task

    # --- running a task ---------------------------------------------------------------

    async def _run(self, task: TaskRecord, call_next: CallNext, ctx: ServerRequestContext[Any, Any]) -> None:
        """Run the intercepted call to the end and record how it ended.

        A tool result (isError or not) completes the task; a JSON-RPC error (`MCPError`)
        or a crash fails it with that error inlined; `cancel()` has already settled it.
        """
        _CURRENT_TASK.set(task)  # this asyncio task's own context: `gather` parks this task
        outcome: HandlerResult = None
        try:
            with task.scope:  # a cancel() ends the run here, already settled as cancelled
                outcome = await call_next(ctx)
        except MCPError as exc:
            task.finish(error=exc.error)
            return
        except Exception:
            logger.exception("task %s crashed", task.task_id)
            task.finish(error=ErrorData(code=INTERNAL_ERROR, message="Internal error while running the task"))
            return
        if task.status in TERMINAL:
            return
        if isinstance(outcome, CallToolResult):
            task.finish(result=_dump(outcome))
        else:  # a tool that asked by MRTR instead of `gather`: nobody can answer that here
            task.finish(error=ErrorData(code=INTERNAL_ERROR, message=f"Tool returned {type(outcome).__name__}"))

    # --- the methods ------------------------------------------------------------------

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        return self._known(ctx, params.task_id).detailed()

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams) -> dict[str, Any]:
        self._known(ctx, params.task_id).answer(params.input_responses)
        return {}  # an empty ack; the runner adds resultType "complete"

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        self._known(ctx, params.task_id).cancel()
        return {}
