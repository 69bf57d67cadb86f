"""The store's health as the page shows it: `memctl history --verify`'s result (every
difference it finds, as it prints them), the live
memories that hold what the secrets check refuses (kept with --allow-secret, or stored before
a rule matched them: a write that is refused leaves no trace in the store), and the number of
live memories over time, drawn as an SVG chart on the server (the page runs no script).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import accumulate

from memstore.errors import HistoryTampered
from memstore.storage.fields import scanned_others
from memstore.storage.secrets import memory_secret
from memstore.ui.reads import UiReads

CHART_WIDTH = 640
CHART_HEIGHT = 160
CHART_MARGIN = 8


@dataclass(frozen=True)
class Verified:
    ok: bool
    message: str
    # Each difference `memctl history --verify` names, one line each.
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class KeptSecret:
    name: str
    where: str
    kind: str
    preview: str


@dataclass(frozen=True)
class Chart:
    """Live memories by day: the polyline's points in the SVG's own units, and its labels."""

    points: str
    first_day: str
    last_day: str
    most: int
    now: int
    width: int = CHART_WIDTH
    height: int = CHART_HEIGHT


@dataclass
class Health:
    verified: Verified
    secrets: list[KeptSecret] = field(default_factory=list)
    chart: Chart | None = None
    checked_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())


def verified(reads: UiReads) -> Verified:
    """`memctl history --verify`'s result, in its words."""
    try:
        report = reads.verify()
    except HistoryTampered as error:
        problems = tuple(error.problems)
        return Verified(
            False,
            f"history does not verify: {_count(len(problems), 'difference')};"
            " the database was changed outside memstore",
            problems,
        )
    unseen = (
        f" (and {report.unseen} of other people's own memories, by their hash only)"
        if report.unseen
        else ""
    )
    unseen_runs = f" (and {report.unseen_runs} by their hash only)" if report.unseen_runs else ""
    return Verified(
        True,
        f"history verified: {_count(report.events, 'event')}{unseen},"
        f" {_count(report.runs, 'run')}{unseen_runs},"
        f" {_count(report.memories, 'memory', 'memories')} as their events replay,"
        f" chain head {report.head}, runs' chain head {report.run_head}",
    )


def _count(number: int, singular: str, plural: str = "") -> str:
    return f"{number} {singular if number == 1 else plural or singular + 's'}"


class SecretScan:
    """The secrets check over every live memory, each memory's answer kept by its content:
    a page after the first scans only what changed (the check is most of the page's time).
    Keyed by the content itself, not by a version, so that a row changed outside memstore
    is scanned again."""

    def __init__(self) -> None:
        self._seen: dict[tuple[object, ...], KeptSecret | None] = {}

    def kept(self, reads: UiReads) -> list[KeptSecret]:
        seen: dict[tuple[object, ...], KeptSecret | None] = {}
        for memory in reads.memories():
            others = scanned_others(memory)
            key = (memory.name, memory.description, memory.body, repr(memory.extra), repr(others))
            if key in self._seen:
                seen[key] = self._seen[key]
                continue
            secret = memory_secret(
                memory.name, memory.description, memory.body, memory.extra, others
            )
            seen[key] = (
                None
                if secret is None
                else KeptSecret(
                    memory.name, secret.field, secret.finding.kind, secret.finding.preview
                )
            )
        self._seen = seen  # only the memories live now: deleted ones are forgotten
        return sorted((kept for kept in seen.values() if kept), key=lambda kept: kept.name)


def chart(days: list[tuple[str, int]]) -> Chart | None:
    """The growth chart of (day, change in live memories) rows, oldest first."""
    if not days:
        return None
    totals = list(accumulate(change for _, change in days))
    most = max(max(totals), 1)
    inner_w = CHART_WIDTH - 2 * CHART_MARGIN
    inner_h = CHART_HEIGHT - 2 * CHART_MARGIN
    steps = max(len(totals) - 1, 1)
    points = []
    for i, total in enumerate(totals):
        x = CHART_MARGIN + inner_w * i / steps
        y = CHART_MARGIN + inner_h * (1 - max(total, 0) / most)
        points.append(f"{x:.1f},{y:.1f}")
    if len(points) == 1:  # one day: a flat line across
        points.append(f"{CHART_WIDTH - CHART_MARGIN:.1f},{points[0].split(',')[1]}")
    return Chart(" ".join(points), days[0][0], days[-1][0], most, totals[-1])


def health(reads: UiReads, scan: SecretScan) -> Health:
    return Health(verified(reads), scan.kept(reads), chart(reads.growth()))
