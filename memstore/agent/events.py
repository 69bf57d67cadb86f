"""What the agent reports as it works (the CLI renders it), and a listener that shows nothing."""

from __future__ import annotations

from typing import Any, Protocol

from memstore.agent.tool_calls import ToolResult


class AgentEvents(Protocol):
    """What the agent reports as it works; the CLI renders it."""

    def waiting(self, active: bool) -> None: ...
    def text(self, delta: str) -> None: ...
    def tool_call(self, name: str, arguments: dict[str, Any]) -> None: ...
    def tool_result(self, name: str, result: ToolResult) -> None: ...
    def notice(self, message: str) -> None: ...


class SilentEvents:
    def waiting(self, active: bool) -> None:
        pass

    def text(self, delta: str) -> None:
        pass

    def tool_call(self, name: str, arguments: dict[str, Any]) -> None:
        pass

    def tool_result(self, name: str, result: ToolResult) -> None:
        pass

    def notice(self, message: str) -> None:
        pass
