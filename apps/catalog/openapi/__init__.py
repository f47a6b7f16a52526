"""Pure OpenAPI → MCP tool compiler (no Django, Channels, Celery, Redis or httpx).

Entry point: :func:`compile_spec`. Module roles:

* ``loader`` — size limit, JSON/YAML parsing, version detection;
* ``refs`` — local ``$ref`` resolution (remote refs refused);
* ``schemas`` — OpenAPI schema → inlined JSON Schema (recursion cut, dialect fixes);
* ``params`` — parameters and bodies → ``inputSchema`` and bindings (body and clash rules);
* ``tool_names`` — tool/argument naming (sanitise, cap, collisions);
* ``compiler`` — walks the paths, one operation → one :class:`CompiledTool`;
* ``security`` — the document's security schemes, as credential kinds;
* ``records`` — compiled tools as JSON records (what the database stores) and back;
* ``invoke`` (with ``outgoing``, ``encoding``, ``codegen``) — a call's arguments →
  :class:`OutgoingRequest`, through a builder generated per tool;
* ``results`` — the HTTP response → ``CallToolResult``;
* ``validation`` (with ``checks``) — arguments checked against ``inputSchema``, ``structuredContent``
  against ``outputSchema``;
* ``conformance`` — the document checked against the rules of its OpenAPI version (beside the
  compiler, where an upload compiles).
"""

from .compiler import compile_spec
from .invoke import build_request
from .model import ArgumentBinding, CompiledTool, CompileOptions, CompileResult, Problem, ToolBinding
from .outgoing import ArgumentError, Credential, InvokeError, OutgoingRequest
from .results import shape_result
from .validation import check_structured, validate_arguments

__all__ = [
    "ArgumentBinding",
    "ArgumentError",
    "Credential",
    "InvokeError",
    "OutgoingRequest",
    "build_request",
    "shape_result",
    "validate_arguments",
    "check_structured",
    "CompileOptions",
    "CompileResult",
    "CompiledTool",
    "Problem",
    "ToolBinding",
    "compile_spec",
]
