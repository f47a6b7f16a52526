"""Era-aware server->client interaction.

Legacy sessions (2024-11-05 ... 2025-11-25) can send a real server->client request
(`sampling/createMessage`, `elicitation/create`, `roots/list`) on the request's SSE
stream and await the answer. The stateless 2026-07-28 wire forbids that: the
server instead returns an `InputRequiredResult` (MRTR, SEP-2322) and the client
retries the original request carrying `inputResponses` (and the sealed
`requestState`). The helpers here let one tool body serve both eras.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    CallToolResult,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequest,
    InputRequiredResult,
    InputResponse,
    ListRootsRequest,
    ListRootsResult,
    MissingRequiredClientCapabilityErrorData,
    SamplingMessage,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

CapabilityName = Literal["sampling", "elicitation", "roots"]


def is_modern(ctx: Context[Any, Any]) -> bool:
    """True on the stateless 2026-07-28 wire (no back-channel for server requests)."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def has_capability(ctx: Context[Any, Any], name: CapabilityName) -> bool:
    caps = ctx.client_capabilities
    return caps is not None and getattr(caps, name) is not None


def require_capability(ctx: Context[Any, Any], name: CapabilityName) -> None:
    """Refuse with -32021 when the client did not declare `name` (SEP-2575).

    `error.data.requiredCapabilities` must be a ClientCapabilities *object*
    (`{"sampling": {}}`), not a list of names; the SDK maps -32021 to HTTP 400.
    """
    if has_capability(ctx, name):
        return
    data = MissingRequiredClientCapabilityErrorData(required_capabilities=ClientCapabilities.model_validate({name: {}}))
    raise MCPError(
        code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=f"Client did not declare the required '{name}' capability",
        data=data.model_dump(by_alias=True, mode="json", exclude_none=True),
    )


def text_result(text: str, *, is_error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)


def elicit_request(message: str, schema: Mapping[str, Any]) -> ElicitRequest:
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=dict(schema)))


def sampling_request(prompt: str, max_tokens: int = 100) -> CreateMessageRequest:
    return CreateMessageRequest(
        params=CreateMessageRequestParams(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
            max_tokens=max_tokens,
        )
    )


def roots_request() -> ListRootsRequest:
    return ListRootsRequest()


def response_matches(request: InputRequest, response: InputResponse) -> bool:
    """A response only counts when its shape fits the request that was asked."""
    if isinstance(request, ElicitRequest):
        return isinstance(response, ElicitResult)
    if isinstance(request, CreateMessageRequest):
        return isinstance(response, CreateMessageResult | CreateMessageResultWithTools)
    return isinstance(response, ListRootsResult)


def collect_inputs(
    ctx: Context[Any, Any],
    wanted: Mapping[str, InputRequest],
    *,
    request_state: str | None = None,
) -> dict[str, InputResponse] | InputRequiredResult:
    """Return the answers for every key in `wanted`, or an InputRequiredResult for the missing ones.

    Unknown extra keys in `inputResponses` are ignored (SEP-2322 SHOULD), and a
    missing or wrongly-shaped answer is re-requested rather than treated as an
    error, which is what `input-required-result-missing-input-response` checks.
    """
    responses = ctx.input_responses or {}
    answers = {
        key: responses[key] for key, req in wanted.items() if key in responses and response_matches(req, responses[key])
    }
    missing = {key: req for key, req in wanted.items() if key not in answers}
    if missing:
        return InputRequiredResult(input_requests=missing, request_state=request_state)
    return answers


async def ask(ctx: Context[Any, Any], key: str, request: InputRequest) -> InputResponse | InputRequiredResult:
    """One server->client question, answered in whichever way the era allows.

    Legacy: send the request on this tool call's stream and await the reply.
    2026-07-28: look for `inputResponses[key]`, otherwise ask via InputRequiredResult.
    """
    if is_modern(ctx):
        outcome = collect_inputs(ctx, {key: request})
        return outcome if isinstance(outcome, InputRequiredResult) else outcome[key]
    session = ctx.request_context.session
    related = ctx.request_context.request_id
    if isinstance(request, ElicitRequest):
        assert isinstance(request.params, ElicitRequestFormParams)
        return await session.elicit_form(request.params.message, request.params.requested_schema, related)
    if isinstance(request, CreateMessageRequest):
        params = request.params
        return await session.create_message(  # pyright: ignore[reportDeprecated]
            params.messages, max_tokens=params.max_tokens, related_request_id=related
        )
    return await session.list_roots()  # pyright: ignore[reportDeprecated]


def describe_sampling(response: InputResponse) -> str:
    """The text of a sampling answer (content may be a single block or a list)."""
    content = getattr(response, "content", None)
    blocks = content if isinstance(content, list) else [content]
    texts = [b.text for b in blocks if isinstance(b, TextContent)]
    return " ".join(texts) if texts else str(content)


async def ask_all(
    ctx: Context[Any, Any],
    wanted: Mapping[str, InputRequest],
    *,
    request_state: str | None = None,
) -> dict[str, InputResponse] | InputRequiredResult:
    """Several questions at once: one InputRequiredResult on 2026-07-28, sequential requests on legacy."""
    if is_modern(ctx):
        return collect_inputs(ctx, wanted, request_state=request_state)
    answers: dict[str, InputResponse] = {}
    for key, request in wanted.items():
        answer = await ask(ctx, key, request)
        assert not isinstance(answer, InputRequiredResult)  # legacy never defers
        answers[key] = answer
    return answers
