"""What every page shares: the links it makes, a time as an age, the templates (Jinja2,
every value escaped unless marked safe by shown.py or highlight.py), and the Site: where the
store is, reading it (UiReads: ReadOnlyStore's DBAPI connection, no SQLAlchemy, never a
write, each statement its own transaction, so a page shows the store as it is now), and what
is kept between pages.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader
from starlette.exceptions import HTTPException
from starlette.responses import HTMLResponse

from memstore.ui.health import Health, SecretScan
from memstore.ui.reads import UiReads
from memstore.ui.shown import shown

TEMPLATES = Path(__file__).parent / "templates"


def memory_url(name: str) -> str:
    return "/memory/" + quote(name, safe="")


def run_url(run_id: str) -> str:
    return "/runs/" + quote(run_id, safe="")


def link(path: str, **parameters: Any) -> str:
    """`path` with the parameters that have a value as its query."""
    given = {key: value for key, value in parameters.items() if value not in (None, "", 1)}
    return path + ("?" + urlencode(given) if given else "")


def age(timestamp: str | None, now: datetime | None = None) -> str:
    """How long ago `timestamp` (memstore's UTC ISO time) was, in its largest unit."""
    if not timestamp:
        return ""
    try:
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return timestamp
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = max(0, int(((now or datetime.now(UTC)) - then).total_seconds()))
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return "just now"


@functools.cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True, lstrip_blocks=True
    )
    env.filters["shown"] = shown
    env.filters["age"] = age
    env.globals.update(memory_url=memory_url, run_url=run_url, link=link)
    return env


def render(template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    html = environment().get_template(template).render(**context)
    return HTMLResponse(html, status_code=status_code)


class Site:
    """What every page shares: where the store is, opening it, what is cached."""

    def __init__(self, location: Path | str, shown_location: str) -> None:
        self.location = location
        self.shown_location = shown_location
        # Kept between pages: each memory's answer of the secrets check, by its content.
        self.secret_scan = SecretScan()
        # The last health page's findings, and the store's mark they were made at.
        self.health: tuple[tuple[Any, ...], Health] | None = None
        self.health_lock = threading.Lock()

        # On a server, one read-only connection per worker thread, kept between requests:
        # each statement on it is a transaction of its own (autocommit), so a page still reads
        # the store as it is now, without paying a connection per page. A SQLite file is
        # opened per request: its reader may open it `immutable` (storage/sqlite/reader.py),
        # which a connection kept open would read stale.
        self._keep = isinstance(location, str)
        self._local = threading.local()
        self._opened: list[UiReads] = []
        self._lock = threading.Lock()

    @contextmanager
    def reads(self) -> Iterator[UiReads]:
        if not self._keep:
            opened = UiReads(self.location)
            try:
                yield opened
            finally:
                opened.close()
            return
        store: UiReads | None = getattr(self._local, "store", None)
        if store is None:
            store = self._local.store = UiReads(self.location)
            with self._lock:
                self._opened.append(store)
        try:
            yield store
        except HTTPException:
            raise  # a page refused, the connection is fine
        except BaseException:
            self._forget(store)  # a connection that failed is not used again
            raise

    def _forget(self, store: UiReads) -> None:
        self._local.store = None
        with self._lock:
            if store in self._opened:
                self._opened.remove(store)
        store.close()

    def close(self) -> None:
        """Close every connection the worker threads opened (the server is stopping)."""
        with self._lock:
            opened, self._opened = self._opened, []
        for store in opened:
            with contextlib.suppress(Exception):  # a server gone already
                store.close()

    def page(self, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return render(template, status_code, store_location=self.shown_location, **context)
