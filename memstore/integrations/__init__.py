"""Doors onto the store for the tools people already use: an MCP server, Claude Code's hooks
and memory folders, and the Anthropic API's memory tool. Each is a thin layer over the same
library: the same validation, secrets check and history (under its own actor), and the same
re-export of `.memory/` after a change (door.py)."""
