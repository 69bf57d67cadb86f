"""The coding agent of `memctl chat`: its loop, tools, context compression and memory."""
