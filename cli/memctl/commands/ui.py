"""memctl ui: a local, read-only page to browse, audit and understand the memory."""

from __future__ import annotations

from typing import Annotated

import typer

from memctl.context import State, fail

UI_EXTRA_HELP = (
    "memctl ui needs the ui extra (Starlette, uvicorn and Jinja2): in memstore's clone, pip"
    " install '.[ui]' (pipx: pipx install --force '.[ui]'; uv: uv tool install --force '.[ui]',"
    " naming every extra you use: '.[ui,mcp]'); see docs/ui.md"
)
UI_LIBRARIES = ("starlette", "uvicorn", "jinja2", "markupsafe")


def ui(
    port: Annotated[
        int,
        typer.Option("--port", min=0, max=65535, help="Serve on this port (default: a free one)."),
    ] = 0,
    no_open: Annotated[
        bool, typer.Option("--no-open", help="Print the URL only; open no browser.")
    ] = False,
) -> None:
    """Browse the memory on a local page: memories, each one's timeline, runs, what recall
    would show, the store's health. Read-only, on 127.0.0.1 behind a token in the URL it
    prints; Ctrl-C stops it. Needs the ui extra."""
    try:
        import memstore.ui.app  # noqa: F401  (the extra's libraries, before anything listens)
        from memstore.ui.server import serve
    except ImportError as error:
        if (error.name or "").partition(".")[0] not in UI_LIBRARIES:
            raise
        fail(UI_EXTRA_HELP)
    location = State.db
    if isinstance(location, str):
        from memstore.settings import shown_url

        shown = shown_url(location)
    else:
        shown = str(location)
    try:
        serve(location, port=port, open_browser=not no_open, shown_location=shown)
    except OSError as error:
        fail(f"cannot serve on 127.0.0.1:{port}: {error.strerror or error}")
