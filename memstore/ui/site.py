"""What every page shares: the links it makes, a time as an age, the templates (Jinja2,
every value escaped unless marked safe by shown.py or highlight.py), and the Site: where the
store is, opening it for one request (UiReads: ReadOnlyStore's DBAPI connection, no
SQLAlchemy, never a write, closed when the page is made, so a page shows the store as it is
now).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader
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

    @contextmanager
    def reads(self) -> Iterator[UiReads]:
        store = UiReads(self.location)
        try:
            yield store
        finally:
            store.close()

    def page(self, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return render(template, status_code, store_location=self.shown_location, **context)
