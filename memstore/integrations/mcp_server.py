"""`memctl mcp`: the workspace's memory as a Model Context Protocol server over stdio, for
Claude Code, Claude Desktop and other MCP clients (the official `mcp` SDK, the optional extra
`agent-memstore[mcp]`).

Tools: recall, search, show, list (read), remember, update, forget (write), history.
Resources: the MEMORY.md index, and each memory's canonical file by name. Every change goes
through the Door, as one run of actor `mcp` whose command names the tool and the client
(from the MCP initialize handshake). Every string argument has a size cap, published in the
tool's input schema and checked before any work; every failure is a tool error in one line.

What the tools do is mcp_tools' (MemoryTools); here they become a server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import ValidationError

from memstore.errors import MemstoreError, NoDatabase
from memstore.files.format import INDEX_FILE_NAME
from memstore.integrations.mcp_tools import MemoryTools

INDEX_URI = "memstore://index"
MEMORY_URI = "memstore://memory/{name}"


class _Server(MCPServer):
    """The SDK's server, with every tool failure said in one line: an argument that does not
    fit its schema (pydantic's report spans lines and echoes the value), and a store error
    (the SDK hides any exception it did not expect behind a generic message)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        if name == "update":
            arguments = _version_by_its_former_name(arguments)
        _refuse_unknown_arguments(self._tool_manager.get_tool(name), arguments)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            cause = error.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(f"{name}: invalid arguments: {_problems(cause)}") from None
            if isinstance(cause, NoDatabase):
                raise ToolError(
                    f"{name}: no memory here yet ({cause}); `remember` creates it"
                ) from None
            if isinstance(cause, MemstoreError | ToolError):  # the SDK's prefix said twice
                raise ToolError(f"{name}: {cause}") from None
            raise


def _version_by_its_former_name(arguments: dict[str, Any]) -> dict[str, Any]:
    """`update`'s arguments with `expected_version`, as `version` was called before it took
    the name `show` gives it, read as `version`: clients written then keep working."""
    if "expected_version" not in arguments:
        return arguments
    rest = {key: value for key, value in arguments.items() if key != "expected_version"}
    former = arguments["expected_version"]
    if rest.setdefault("version", former) != former:
        raise ToolError("update: version and expected_version (its former name) differ")
    return rest


def _refuse_unknown_arguments(tool: Tool | None, arguments: dict[str, Any]) -> None:
    """An argument the tool does not take is refused, not dropped (as pydantic would): a
    model that wrote `version_seen` for `version` would think its update was checked."""
    if tool is None:
        return
    known = tool.parameters.get("properties", {})
    unknown = sorted(key for key in arguments if key not in known)
    if unknown:
        raise ToolError(
            f"{tool.name}: unknown argument {', '.join(repr(key[:40]) for key in unknown[:5])}"
            f" (it takes {', '.join(known)})"
        )


def _problems(error: ValidationError) -> str:
    """Each argument's problem, without its value (which may be huge, or a secret)."""
    return "; ".join(
        f"{'.'.join(str(part) for part in problem['loc']) or 'arguments'}: {problem['msg']}"
        for problem in error.errors(include_url=False, include_input=False)
    )


READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def build_server(tools: MemoryTools, version: str = "") -> MCPServer:
    """The MCP server of these tools and resources; `version` is what it tells clients it
    is (memstore's, which this layer may not import)."""
    server = _Server(
        "memstore",
        version=version,
        instructions="Long-term memory of this workspace, kept by memstore: call `recall` "
        "with the user's request at the start of a task; `remember` what they ask you to "
        "keep, and `update` or `forget` what turns out wrong. Every change is audited.",
        log_level="WARNING",
    )
    for tool in (tools.recall, tools.search, tools.show, tools.history):
        server.add_tool(tool, annotations=READ)
    server.add_tool(tools.list_memories, name="list", annotations=READ)
    server.add_tool(tools.remember, annotations=ToolAnnotations(destructive_hint=False))
    server.add_tool(tools.update, annotations=ToolAnnotations(idempotent_hint=True))
    server.add_tool(tools.forget, annotations=ToolAnnotations(idempotent_hint=False))
    server.resource(INDEX_URI, name=INDEX_FILE_NAME, mime_type="text/markdown")(tools.index)
    server.resource(MEMORY_URI, name="memory", mime_type="text/markdown")(tools.memory_file)
    return server


def serve(db: Path | str | None = None, version: str = "") -> None:
    """Serve the store memctl would use here (or `db`) over stdio until the client leaves."""
    tools = MemoryTools(db)
    try:
        tools.open_existing()
        build_server(tools, version).run("stdio")
    finally:
        tools.close()
