"""Tools called by the conformance server scenarios (everything except the MRTR set in `mrtr`)."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import (
    AudioContent,
    CallToolResult,
    ElicitResult,
    EmbeddedResource,
    ImageContent,
    InputRequiredResult,
    LoggingLevel,
    TextContent,
    TextResourceContents,
)
from pydantic import Field

from .catalog import WATCHED_RESOURCE_URI, WatchedResource
from .interaction import (
    ask,
    describe_sampling,
    elicit_request,
    is_modern,
    require_capability,
    sampling_request,
    text_result,
)
from .legacy import LegacySessionState, session_key
from .media import PNG_BASE64, WAV_BASE64

ToolOutcome = CallToolResult | InputRequiredResult

DYNAMIC_TOOL = "test_dynamic_tool"
DYNAMIC_PROMPT = "test_dynamic_prompt"

# json-schema-2020-12: the listed inputSchema must survive verbatim, including the
# SEP-2106 vocabulary ($anchor, allOf/anyOf, if/then/else). MCPServer derives schemas
# from signatures, so this one is set explicitly on the Tool (see `schema_tools`).
JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

SEP1034_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "description": "Verified user", "default": True},
    },
}

SEP1330_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}

USER_INFO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}


def _json_schema_tool(
    name: str | None = None,
    address: dict[str, Any] | None = None,
    contactMethod: str | None = None,  # noqa: N803 - wire argument name
    phone: str | None = None,
    email: str | None = None,
) -> str:
    contact = phone if contactMethod == "phone" else email
    return f"Received name={name!r}, contact={contact!r}, address={address!r}"


def schema_tools() -> list[Tool]:
    """Tools whose advertised inputSchema is hand-written rather than derived."""
    tool = Tool.from_function(
        _json_schema_tool,
        name="json_schema_2020_12_tool",
        description="Tool with JSON Schema 2020-12 features",
        structured_output=False,
    )
    return [tool.model_copy(update={"parameters": JSON_SCHEMA_2020_12})]


def _elicitation_summary(answer: ElicitResult) -> str:
    return f"Elicitation completed: action={answer.action}, content={answer.content}"


def register_tools(server: MCPServer[Any], legacy: LegacySessionState, watched: WatchedResource) -> None:
    def tool(name: str, description: str) -> Any:
        # structured_output=False: every fixture tool returns content blocks only.
        return server.tool(name=name, description=description, structured_output=False)

    async def log(ctx: Context[Any, Any], level: LoggingLevel, message: str) -> None:
        # Legacy: honour this session's logging/setLevel. 2026-07-28: the SDK itself
        # drops the entry unless the request opted in via _meta logLevel.
        if is_modern(ctx) or legacy.should_log(session_key(ctx.request_context), level):
            await ctx.log(level, message, logger_name="conformance-fixture")  # pyright: ignore[reportDeprecated]

    # --- plain content --------------------------------------------------------------
    @tool("test_simple_text", "Returns a simple text response")
    def simple_text() -> CallToolResult:
        return text_result("This is a simple text response for testing.")

    @tool("test_image_content", "Returns a 1x1 PNG image")
    def image_content() -> CallToolResult:
        return CallToolResult(content=[ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")])

    @tool("test_audio_content", "Returns a tiny WAV clip")
    def audio_content() -> CallToolResult:
        return CallToolResult(content=[AudioContent(type="audio", data=WAV_BASE64, mime_type="audio/wav")])

    @tool("test_embedded_resource", "Returns an embedded text resource")
    def embedded_resource() -> CallToolResult:
        resource = TextResourceContents(
            uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
        )
        return CallToolResult(content=[EmbeddedResource(type="resource", resource=resource)])

    @tool("test_multiple_content_types", "Returns text, image and resource content")
    def multiple_content_types() -> CallToolResult:
        resource = TextResourceContents(
            uri="test://mixed-content-resource", mime_type="application/json", text='{"test":"data","value":123}'
        )
        return CallToolResult(
            content=[
                TextContent(type="text", text="Multiple content types test:"),
                ImageContent(type="image", data=PNG_BASE64, mime_type="image/png"),
                EmbeddedResource(type="resource", resource=resource),
            ]
        )

    @tool("test_error_handling", "Always fails with a tool execution error (isError: true)")
    def error_handling() -> CallToolResult:
        # MCPServer turns a ToolError into CallToolResult(isError=True) carrying the message.
        raise ToolError("This tool intentionally returns an error for testing")

    # --- notifications during a call ---------------------------------------------
    @tool("test_tool_with_logging", "Sends three info log notifications while running")
    async def tool_with_logging(ctx: Context[Any, Any]) -> CallToolResult:
        await log(ctx, "info", "Tool execution started")
        await anyio.sleep(0.05)
        await log(ctx, "info", "Tool processing data")
        await anyio.sleep(0.05)
        await log(ctx, "info", "Tool execution completed")
        return text_result("Tool with logging executed successfully")

    @tool("test_logging_tool", "Logs at info; on 2026-07-28 nothing is sent unless _meta logLevel opts in")
    async def logging_tool(ctx: Context[Any, Any]) -> CallToolResult:
        for step in ("one", "two", "three"):
            await log(ctx, "info", f"logging tool step {step}")
        return text_result("Logging tool finished")

    @tool("test_tool_with_progress", "Reports progress 0/100, 50/100, 100/100 when given a progressToken")
    async def tool_with_progress(ctx: Context[Any, Any]) -> CallToolResult:
        # report_progress is a no-op when the request carried no progressToken.
        for value in (0, 50, 100):
            await ctx.report_progress(value, 100, f"Progress {value}%")
            if value < 100:
                await anyio.sleep(0.05)
        return text_result("Tool with progress executed successfully")

    # --- server -> client requests (legacy) / InputRequiredResult (2026) ---------------
    @tool("test_sampling", "Asks the client's LLM (sampling/createMessage) with the given prompt")
    async def sampling(prompt: str, ctx: Context[Any, Any]) -> ToolOutcome:
        answer = await ask(ctx, "sampling", sampling_request(prompt))
        if isinstance(answer, InputRequiredResult):
            return answer
        return text_result(f"LLM response: {describe_sampling(answer)}")

    @tool("test_elicitation", "Asks the user (elicitation/create) for a username and email")
    async def elicitation(message: str, ctx: Context[Any, Any]) -> ToolOutcome:
        answer = await ask(ctx, "user_info", elicit_request(message, USER_INFO_SCHEMA))
        if isinstance(answer, InputRequiredResult):
            return answer
        assert isinstance(answer, ElicitResult)
        return text_result(f"User response: action={answer.action}, content={answer.content}")

    @tool("test_elicitation_sep1034_defaults", "Elicitation whose schema has defaults for every primitive type")
    async def elicitation_defaults(ctx: Context[Any, Any]) -> ToolOutcome:
        answer = await ask(ctx, "defaults", elicit_request("Please review and update the form fields", SEP1034_SCHEMA))
        if isinstance(answer, InputRequiredResult):
            return answer
        assert isinstance(answer, ElicitResult)
        return text_result(_elicitation_summary(answer))

    @tool("test_elicitation_sep1330_enums", "Elicitation using all five SEP-1330 enum schema variants")
    async def elicitation_enums(ctx: Context[Any, Any]) -> ToolOutcome:
        answer = await ask(ctx, "enums", elicit_request("Please choose your options", SEP1330_SCHEMA))
        if isinstance(answer, InputRequiredResult):
            return answer
        assert isinstance(answer, ElicitResult)
        return text_result(_elicitation_summary(answer))

    @tool("test_streaming_elicitation", "Needs elicitation mid-call; on 2026-07-28 only via InputRequiredResult")
    async def streaming_elicitation(ctx: Context[Any, Any]) -> ToolOutcome:
        require_capability(ctx, "elicitation")
        schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
        answer = await ask(ctx, "stream_question", elicit_request("Please provide an answer", schema))
        if isinstance(answer, InputRequiredResult):
            return answer
        assert isinstance(answer, ElicitResult)
        return text_result(_elicitation_summary(answer))

    @tool("test_missing_capability", "Requires the client 'sampling' capability; -32021 when undeclared")
    async def missing_capability(ctx: Context[Any, Any]) -> ToolOutcome:
        require_capability(ctx, "sampling")
        answer = await ask(ctx, "capability_probe", sampling_request("Reply with OK", max_tokens=10))
        if isinstance(answer, InputRequiredResult):
            return answer
        return text_result(f"Sampling capability available: {describe_sampling(answer)}")

    # --- SSE resumability (legacy streamable HTTP) --------------------------------------
    @tool("test_reconnection", "Closes its SSE stream mid-call; the result arrives after Last-Event-ID resume")
    async def reconnection(ctx: Context[Any, Any]) -> CallToolResult:
        await anyio.sleep(0.1)
        # No-op without an event store or on the 2026 wire (single-exchange responses).
        await ctx.close_sse_stream()
        await anyio.sleep(0.3)
        return text_result("Reconnection test completed")

    # --- list changes and resource updates ---------------------------------------------
    async def dynamic_tool() -> CallToolResult:
        return text_result("This tool is added and removed by test_trigger_tool_change")

    async def dynamic_prompt() -> str:
        return "This prompt is added and removed by test_trigger_prompt_change."

    server.add_tool(dynamic_tool, name=DYNAMIC_TOOL, description="Toggled by test_trigger_tool_change")
    server.prompt(name=DYNAMIC_PROMPT, description="Toggled by test_trigger_prompt_change")(dynamic_prompt)
    present = {"tool": True, "prompt": True}

    @tool("test_trigger_tool_change", f"Adds or removes '{DYNAMIC_TOOL}' and announces tools/list_changed")
    async def trigger_tool_change(ctx: Context[Any, Any]) -> CallToolResult:
        if present["tool"]:
            server.remove_tool(DYNAMIC_TOOL)
        else:
            server.add_tool(dynamic_tool, name=DYNAMIC_TOOL, description="Toggled by test_trigger_tool_change")
        present["tool"] = not present["tool"]
        await ctx.notify_tools_changed()  # 2026-07-28 subscriptions/listen streams
        if not is_modern(ctx):
            await ctx.session.send_tool_list_changed()  # legacy standalone GET stream
        return text_result(f"{DYNAMIC_TOOL} is now {'present' if present['tool'] else 'absent'}")

    @tool("test_trigger_prompt_change", f"Adds or removes '{DYNAMIC_PROMPT}' and announces prompts/list_changed")
    async def trigger_prompt_change(ctx: Context[Any, Any]) -> CallToolResult:
        if present["prompt"]:
            server.remove_prompt(DYNAMIC_PROMPT)
        else:
            server.prompt(name=DYNAMIC_PROMPT, description="Toggled by test_trigger_prompt_change")(dynamic_prompt)
        present["prompt"] = not present["prompt"]
        await ctx.notify_prompts_changed()
        if not is_modern(ctx):
            await ctx.session.send_prompt_list_changed()
        return text_result(f"{DYNAMIC_PROMPT} is now {'present' if present['prompt'] else 'absent'}")

    @tool("test_update_watched_resource", f"Changes {WATCHED_RESOURCE_URI} and notifies subscribers")
    async def update_watched_resource(ctx: Context[Any, Any]) -> CallToolResult:
        watched.version += 1
        await ctx.notify_resource_updated(WATCHED_RESOURCE_URI)
        if not is_modern(ctx) and legacy.is_subscribed(session_key(ctx.request_context), WATCHED_RESOURCE_URI):
            await ctx.session.send_resource_updated(WATCHED_RESOURCE_URI)
        return text_result(f"{WATCHED_RESOURCE_URI} is now at version {watched.version}")

    # --- SEP-2243 custom headers ------------------------------------------------------------
    @tool("test_custom_headers", "Mirrors 'region' into the Mcp-Param-Region header (x-mcp-header)")
    def custom_headers(
        region: Annotated[
            str, Field(description="Region, mirrored as a header", json_schema_extra={"x-mcp-header": "Region"})
        ],
        query: str = "",
    ) -> CallToolResult:
        return text_result(f"region={region} query={query}")
