"""Value types of the OpenAPI → MCP tool compiler.

Everything here is an immutable value (frozen dataclass). The schema dictionaries inside a
:class:`CompiledTool` are plain ``dict`` objects so that they serialise directly with orjson/json,
but sub-schemas reached through the same ``$ref`` are *shared* between tools: callers must treat
them as read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .security import SecurityScheme

Location = Literal["path", "query", "header", "cookie", "body"]
BodyMode = Literal["none", "properties", "whole"]

#: Hard ceiling for tool names; MCP clients commonly reject longer ones.
MAX_NAME_LENGTH_LIMIT = 128


@dataclass(frozen=True, slots=True)
class Problem:
    """An error or warning, located by the RFC 6901 JSON pointer into the uploaded document.

    ``pointer`` is ``""`` for the document as a whole.
    """

    pointer: str
    message: str

    def __str__(self) -> str:
        return f"{self.pointer or '(document)'}: {self.message}"


@dataclass(frozen=True, slots=True)
class CompileOptions:
    """Tunables of :func:`compile_spec`; the defaults are what the gateway uses for uploads."""

    #: Documents larger than this many bytes are refused before parsing.
    max_bytes: int = 50 * 1024 * 1024
    #: Tool names are capped at this length (1..128); see ``tool_names.py`` for the rule.
    max_name_length: int = 64
    #: Tool descriptions are cut to this many characters (an ellipsis marks the cut).
    max_description_length: int = 1024
    #: ``deprecated: true`` operations become tools only when this is set.
    include_deprecated: bool = False
    #: Inlined schemas deeper than this are replaced by ``{}`` (guards against pathological nesting).
    max_schema_depth: int = 64
    #: Total schema nodes converted per document; exceeding it is an error (guards YAML alias bombs).
    max_schema_nodes: int = 2_000_000

    def __post_init__(self) -> None:
        if not 1 <= self.max_name_length <= MAX_NAME_LENGTH_LIMIT:
            raise ValueError(f"max_name_length must be between 1 and {MAX_NAME_LENGTH_LIMIT}")
        if self.max_bytes < 1 or self.max_description_length < 16 or self.max_schema_depth < 2:
            raise ValueError("max_bytes, max_description_length (>= 16) and max_schema_depth (>= 2) too small")


@dataclass(frozen=True, slots=True)
class ArgumentBinding:
    """How one top-level ``inputSchema`` property maps back onto the HTTP request.

    ``name`` is the original parameter (or body property) name; ``None`` means the argument *is* the
    whole request body. ``style``/``explode``/``allow_reserved`` are the effective OpenAPI
    serialisation settings (defaults applied; Swagger 2.0 ``collectionFormat`` translated) and are
    ``None`` for body arguments. ``content_type`` is set for OpenAPI 3 parameters defined by
    ``content`` instead of ``schema`` (the value is serialised with that media type).
    """

    argument: str
    location: Location
    name: str | None
    required: bool = False
    style: str | None = None
    explode: bool | None = None
    allow_reserved: bool = False
    content_type: str | None = None


@dataclass(frozen=True, slots=True)
class ToolBinding:
    """Everything needed to turn a ``tools/call`` back into an HTTP request.

    The request URL is ``servers[i] + path`` with ``{name}`` placeholders of ``path`` filled from
    path arguments; server URLs have server variables replaced by their defaults and no trailing
    slash (``""`` means "relative to wherever the document came from").
    ``body_mode`` says how body arguments are assembled: ``"properties"`` — each body argument is
    one property of a JSON/form object; ``"whole"`` — the single body argument is the body;
    ``"none"`` — no request body.
    """

    method: str
    path: str
    servers: tuple[str, ...]
    arguments: tuple[ArgumentBinding, ...]
    body_mode: BodyMode = "none"
    body_content_type: str | None = None
    body_required: bool = False

    def argument(self, argument: str) -> ArgumentBinding | None:
        """The binding of the ``inputSchema`` property ``argument``, if there is one."""
        for binding in self.arguments:
            if binding.argument == argument:
                return binding
        return None


@dataclass(frozen=True, slots=True)
class CompiledTool:
    """One MCP tool compiled from exactly one OpenAPI operation."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    annotations: dict[str, Any]
    binding: ToolBinding
    #: The operation's ``operationId`` as written (``None`` when absent).
    operation_id: str | None = None
    #: JSON pointer of the operation object, e.g. ``/paths/~1pets/get``.
    pointer: str = ""
    deprecated: bool = False
    #: The operation's ``tags``: what a virtual host's curation selects tools by.
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CompileResult:
    """Outcome of :func:`compile_spec`.

    Contract: if ``errors`` is non-empty, ``tools`` is empty — nothing half-compiled is published.
    ``errors`` lists every error found, not only the first one.
    """

    tools: tuple[CompiledTool, ...] = ()
    warnings: tuple[Problem, ...] = ()
    errors: tuple[Problem, ...] = ()
    #: ``info.title`` / ``info.version`` of the document (``""`` when absent).
    title: str = ""
    version: str = ""
    #: ``"2.0"``, ``"3.0"`` or ``"3.1"``; ``""`` when the document could not be identified.
    spec_version: str = ""
    #: Supported security schemes, the preferred first (see ``security.py``).
    security: tuple[SecurityScheme, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors
