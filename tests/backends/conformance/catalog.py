"""Resources, resource templates, prompts and completion used by the conformance scenarios."""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp_types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    EmbeddedResource,
    ImageContent,
    PromptReference,
    ResourceTemplateReference,
    TextContent,
    TextResourceContents,
)

from .media import PNG_BASE64, PNG_BYTES

WATCHED_RESOURCE_URI = "test://watched-resource"

# Completion candidates for test_prompt_with_arguments / the template id; the
# scenario only checks shape, but real prefix filtering keeps the fixture honest.
_ARG_CANDIDATES: dict[str, list[str]] = {
    "arg1": ["paris", "park", "party", "test", "testValue1"],
    "arg2": ["world", "testValue2"],
    "id": ["1", "123", "42"],
}


class WatchedResource:
    """Mutable content behind test://watched-resource, bumped by a tool to produce updates."""

    def __init__(self) -> None:
        self.version = 0

    def text(self) -> str:
        return f"Watched resource content, version {self.version}."


def register_resources(server: MCPServer[Any], watched: WatchedResource) -> None:
    @server.resource(
        "test://static-text",
        name="static-text",
        description="A static text resource",
        mime_type="text/plain",
    )
    def static_text() -> str:
        return "This is the content of the static text resource."

    @server.resource(
        "test://static-binary",
        name="static-binary",
        description="A static binary resource (1x1 PNG)",
        mime_type="image/png",
    )
    def static_binary() -> bytes:
        return PNG_BYTES

    @server.resource(
        WATCHED_RESOURCE_URI,
        name="watched-resource",
        description="A resource clients can subscribe to; test_update_watched_resource changes it",
        mime_type="text/plain",
    )
    def watched_resource() -> str:
        return watched.text()

    @server.resource(
        "test://template/{id}/data",
        name="template-data",
        description="A resource template substituting {id}",
        mime_type="application/json",
    )
    def template_data(id: str) -> str:  # noqa: A002 - the URI variable is called `id`
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"}, separators=(",", ":"))


def register_prompts(server: MCPServer[Any]) -> None:
    @server.prompt(name="test_simple_prompt", description="A simple prompt without arguments")
    def simple_prompt() -> list[Message]:
        return [UserMessage("This is a simple prompt for testing.")]

    @server.prompt(name="test_prompt_with_arguments", description="A prompt with two required arguments")
    def prompt_with_arguments(arg1: str, arg2: str) -> list[Message]:
        return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]

    @server.prompt(name="test_prompt_with_embedded_resource", description="A prompt embedding a resource")
    def prompt_with_embedded_resource(resourceUri: str) -> list[Message]:  # noqa: N803 - wire argument name
        resource = TextResourceContents(
            uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
        )
        return [
            UserMessage(EmbeddedResource(type="resource", resource=resource)),
            UserMessage("Please process the embedded resource above."),
        ]

    @server.prompt(name="test_prompt_with_image", description="A prompt containing an image")
    def prompt_with_image() -> list[Message]:
        return [
            UserMessage(ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")),
            UserMessage(TextContent(type="text", text="Please analyze the image above.")),
        ]


def register_completion(server: MCPServer[Any]) -> None:
    @server.completion()
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion:
        candidates = _ARG_CANDIDATES.get(argument.name, [])
        values = [c for c in candidates if c.startswith(argument.value)]
        return Completion(values=values, total=len(values), has_more=False)
