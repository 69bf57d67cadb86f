#!/bin/sh
# Claude Code's hooks, answered by `memctl hook` (its JSON on stdin; it exits 0 whatever
# happens): SessionStart and UserPromptSubmit get the memories to add on stdout; Stop,
# SessionEnd and PreCompact record the session for a detached worker to learn from.
#
# Without memctl on PATH the hook says so in one line and exits 0, so that Claude Code goes on
# (exit 2 would block the prompt): on stderr, which `claude --debug` shows, and at a session's
# start as a systemMessage, which Claude Code shows the person.
if command -v memctl >/dev/null 2>&1; then
    exec memctl hook
fi
message="memstore: memctl is not on PATH; install it from memstore's clone with pipx install '.[mcp]' (or uv tool install '.[mcp]'), then restart Claude Code"
echo "$message" >&2
if [ "$1" = "SessionStart" ]; then
    printf '{"systemMessage": "%s"}\n' "$message"
fi
exit 0
