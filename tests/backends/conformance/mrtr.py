"""Multi-round-trip (`input-required-result-*`, SEP-2322) tools and prompt.

On 2026-07-28 these answer with `InputRequiredResult` and complete when the client
retries with `inputResponses`. `requestState` values minted here are plaintext; the
SDK's `RequestStateBoundary` seals them (AEAD) on the way out and verifies the echo on
the way in, so a tampered state never reaches a handler - it is rejected with -32602,
which is what `input-required-result-tampered-state` checks. On legacy sessions the
same tools fall back to real server->client requests via `ask`/`ask_all`.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp_types import CallToolResult, ElicitResult, InputRequest, InputRequiredResult, ListRootsResult

from .interaction import (
    ask,
    ask_all,
    describe_sampling,
    elicit_request,
    has_capability,
    is_modern,
    roots_request,
    sampling_request,
    text_result,
)

ToolOutcome = CallToolResult | InputRequiredResult


def _string_schema(field: str) -> dict[str, Any]:
    return {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}


NAME_REQUEST = elicit_request("What is your name?", _string_schema("name"))
CONFIRM_REQUEST = elicit_request(
    "Please confirm",
    {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
)
STEP1_REQUEST = elicit_request("Step 1: What is your name?", _string_schema("name"))
STEP2_REQUEST = elicit_request("Step 2: What is your favorite color?", _string_schema("color"))


def _field(answer: object, name: str) -> str:
    if isinstance(answer, ElicitResult) and answer.content is not None:
        return str(answer.content.get(name, ""))
    return ""


def register_mrtr(server: MCPServer[Any]) -> None:
    def tool(name: str, description: str) -> Any:
        return server.tool(name=name, description=description, structured_output=False)

    @tool("test_input_required_result_elicitation", "MRTR: asks for the user's name (key 'user_name')")
    async def mrtr_elicitation(ctx: Context[Any, Any]) -> ToolOutcome:
        answer = await ask(ctx, "user_name", NAME_REQUEST)
        if isinstance(answer, InputRequiredResult):
            return answer
        return text_result(f"Hello, {_field(answer, 'name')}!")

    @tool("test_input_required_result_sampling", "MRTR: asks the client LLM (key 'capital_question')")
    async def mrtr_sampling(ctx: Context[Any, Any]) -> ToolOutcome:
        answer = await ask(ctx, "capital_question", sampling_request("What is the capital of France?"))
        if isinstance(answer, InputRequiredResult):
            return answer
        return text_result(f"Sampling answer: {describe_sampling(answer)}")

    @tool("test_input_required_result_list_roots", "MRTR: asks for the client's roots (key 'client_roots')")
    async def mrtr_list_roots(ctx: Context[Any, Any]) -> ToolOutcome:
        answer = await ask(ctx, "client_roots", roots_request())
        if isinstance(answer, InputRequiredResult):
            return answer
        roots = answer.roots if isinstance(answer, ListRootsResult) else []
        return text_result("Client roots: " + (", ".join(str(r.uri) for r in roots) or "(none)"))

    @tool("test_input_required_result_request_state", "MRTR: round-trips requestState; replies 'state-ok'")
    async def mrtr_request_state(ctx: Context[Any, Any]) -> ToolOutcome:
        expected = "awaiting-confirm"
        answers = await ask_all(ctx, {"confirm": CONFIRM_REQUEST}, request_state=expected)
        if isinstance(answers, InputRequiredResult):
            return answers
        if is_modern(ctx) and ctx.request_state != expected:
            # Answers without our state belong to no round we started: ask again.
            return InputRequiredResult(input_requests={"confirm": CONFIRM_REQUEST}, request_state=expected)
        return text_result(f"state-ok: confirmed={_field(answers['confirm'], 'ok')}")

    @tool("test_input_required_result_multiple_inputs", "MRTR: elicitation + sampling + roots in one round")
    async def mrtr_multiple_inputs(ctx: Context[Any, Any]) -> ToolOutcome:
        wanted: dict[str, InputRequest] = {
            "user_name": NAME_REQUEST,
            "greeting": sampling_request("Generate a greeting", max_tokens=50),
            "client_roots": roots_request(),
        }
        answers = await ask_all(ctx, wanted, request_state="multiple-inputs")
        if isinstance(answers, InputRequiredResult):
            return answers
        return text_result(
            f"name={_field(answers['user_name'], 'name')}; greeting={describe_sampling(answers['greeting'])}"
        )

    @tool("test_input_required_result_multi_round", "MRTR: two elicitation rounds with evolving requestState")
    async def mrtr_multi_round(ctx: Context[Any, Any]) -> ToolOutcome:
        if not is_modern(ctx):
            answers = await ask_all(ctx, {"step1": STEP1_REQUEST, "step2": STEP2_REQUEST})
            assert not isinstance(answers, InputRequiredResult)
            return text_result(f"{_field(answers['step1'], 'name')} likes {_field(answers['step2'], 'color')}")
        state = ctx.request_state or ""
        responses = ctx.input_responses or {}
        if state.startswith("round-2:"):
            name = state.removeprefix("round-2:")
            if isinstance(responses.get("step2"), ElicitResult):
                return text_result(f"{name} likes {_field(responses['step2'], 'color')}")
            return InputRequiredResult(input_requests={"step2": STEP2_REQUEST}, request_state=state)
        if state == "round-1" and isinstance(responses.get("step1"), ElicitResult):
            # The name travels in the (sealed) state, so the server stays stateless.
            name = _field(responses["step1"], "name")
            return InputRequiredResult(input_requests={"step2": STEP2_REQUEST}, request_state=f"round-2:{name}")
        return InputRequiredResult(input_requests={"step1": STEP1_REQUEST}, request_state="round-1")

    @tool("test_input_required_result_tampered_state", "MRTR: integrity-protected requestState")
    async def mrtr_tampered_state(ctx: Context[Any, Any]) -> ToolOutcome:
        # Tampering is caught by the SDK boundary before this body runs.
        answers = await ask_all(ctx, {"confirm": CONFIRM_REQUEST}, request_state="integrity-protected")
        if isinstance(answers, InputRequiredResult):
            return answers
        return text_result("requestState verified")

    @tool("test_input_required_result_capabilities", "MRTR: only asks for what the client declared")
    async def mrtr_capabilities(ctx: Context[Any, Any]) -> ToolOutcome:
        wanted: dict[str, InputRequest] = {}
        if has_capability(ctx, "sampling"):
            wanted["capital_question"] = sampling_request("What is the capital of France?")
        if has_capability(ctx, "elicitation"):
            wanted["user_name"] = NAME_REQUEST
        if has_capability(ctx, "roots"):
            wanted["client_roots"] = roots_request()
        if not wanted:
            return text_result("Client declared no sampling, elicitation or roots capability; nothing to ask")
        answers = await ask_all(ctx, wanted)
        if isinstance(answers, InputRequiredResult):
            return answers
        return text_result("Answered: " + ", ".join(sorted(answers)))

    @server.prompt(name="test_input_required_result_prompt", description="MRTR on prompts/get (key 'user_context')")
    async def mrtr_prompt(ctx: Context[Any, Any]) -> list[Message] | InputRequiredResult:
        request = elicit_request("What context should the prompt use?", _string_schema("context"))
        answer = await ask(ctx, "user_context", request)
        if isinstance(answer, InputRequiredResult):
            return answer
        return [UserMessage(f"Use this context: {_field(answer, 'context')}")]
