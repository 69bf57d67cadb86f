"""The page's Starlette app: its routes (pages.py), the stylesheet, a refusal or an error
as a page, and the guard (guard.py) in front of all of them.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from memstore.ui import pages
from memstore.ui.guard import Guard
from memstore.ui.site import Site

STATIC = Path(__file__).parent / "static"
# How long a stopping server waits for the health findings it is making (a Ctrl-C must not
# wait for a large store's; the thread is a daemon, and its connection is closed under it).
WARM_JOIN_S = 5

log = logging.getLogger(__name__)


Handler = Callable[[Site, Request], Response]


def build_app(
    location: Path | str, *, token: str, port: int, shown_location: str | None = None
) -> Guard:
    """The page for the store at `location`, served on 127.0.0.1:`port` behind `token`."""
    site = Site(location, shown_location or str(location))

    def route(path: str, handler: Handler) -> Route:
        def endpoint(request: Request) -> Response:
            return handler(site, request)

        return Route(path, endpoint, methods=["GET"])

    async def not_found(request: Request, error: Exception) -> Response:
        status = error.status_code if isinstance(error, HTTPException) else 500
        detail = error.detail if isinstance(error, HTTPException) else "error"
        return site.page("error.html", status, status=status, detail=detail)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # The health page's findings take a while on a large store (every event's hash,
        # every memory scanned): made as the server starts, they are ready when asked for.
        warming = threading.Thread(target=_warm, args=(site,), name="ui-health", daemon=True)
        warming.start()
        yield
        warming.join(timeout=WARM_JOIN_S)
        site.close()

    app = Starlette(
        lifespan=lifespan,
        routes=[
            route("/", pages.memories),
            route("/memory/{name:path}", pages.memory),
            route("/runs", pages.runs),
            route("/runs/{run_id}", pages.run),
            route("/recall", pages.recall),
            route("/health", pages.health),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        exception_handlers={HTTPException: not_found},
    )
    return Guard(app, token=token, port=port)


def _warm(site: Site) -> None:
    try:
        pages.health_findings(site)
    except Exception as error:  # the page says it when asked; the server goes on
        log.debug("health findings not made at start: %s", error)
