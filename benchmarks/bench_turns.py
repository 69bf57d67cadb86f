"""Model calls and request bytes per turn of a scripted 30-turn chat: memstore's rules beside
the seed's.

Not a test: it prints figures. One scripted conversation of a user with a coding agent
(preferences, project facts, corrections of earlier preferences, small talk, turns that use
tools) goes through the real anthropic client, pointed at the scripted local server of
tests/anthropic_server.py, and a real MemoryStore in a temporary folder, twice:

- memstore: AgentMemory.before_turn (selection) and after_turn (extraction every turn,
  consolidation only when memstore.learning.consolidation_due says so, export).
- seed: selection (memstore.recall.recall) and extraction every turn, and consolidation on
  every turn once the store holds at least --seed-threshold memories (confirmed, a refusal
  caught), export after any change.

The scripted "model" answers by the request's system prompt: selection "[0]"; extraction the
turn's scripted items (a new or updated memory on about half of the turns, [] on the others);
consolidation merges each scripted group of duplicates of which at least two memories are in
the request, else answers an empty plan. The agent's own model call(s) of each turn are the
same under both rules and are neither simulated nor counted. Request bytes are the
Content-Length of each request as the client sent it (the JSON body, headers not included).
Non-model work is the wall time of the memory work of a turn minus the time spent inside
memstore.llm.ask_text (the SDK, the localhost round trip and the scripted server).

    .venv/bin/python benchmarks/bench_turns.py              # per-turn table and totals
    .venv/bin/python benchmarks/bench_turns.py --totals     # totals only
    .venv/bin/python benchmarks/bench_turns.py --preload 40 # from a store of 40 memories
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import memstore.learning.consolidate
import memstore.learning.extract
import memstore.recall.selection
from memstore.agent.memory import AgentMemory
from memstore.errors import ConsolidationRefused, MemstoreError
from memstore.files.exporter import export_memories
from memstore.learning.consolidate import ACTOR as CONSOLIDATION_ACTOR
from memstore.learning.consolidate import CONSOLIDATION_SYSTEM, Consolidation, consolidate_memories
from memstore.learning.extract import EXTRACTION_SYSTEM, MAX_ITEMS_PER_TURN, extract_memories
from memstore.llm.client import make_client, small_model_name
from memstore.recall.block import memories_block
from memstore.recall.selection import SELECTION_SYSTEM
from memstore.recall.turn import recall
from memstore.storage.store import MemoryStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.anthropic_server
from tests.anthropic_server import (
    AnthropicServer,
    ScriptedReply,
    error_reply,
    serve,
    text_reply,
)

if TYPE_CHECKING:
    from anthropic import Anthropic

Message = dict[str, Any]
Item = dict[str, str]
KINDS = ("selection", "extraction", "consolidation")
SESSION = "bench-turns"
MAX_RECALLED = 5

# -- the conversation ---------------------------------------------------------------------


@dataclass
class Turn:
    label: str
    # The user's message first, then the agent's tool calls, the tool results and its reply.
    messages: list[Message]
    # What the scripted extraction answers after this turn.
    extraction: list[Item] = field(default_factory=list)


def item(name: str, type: str, description: str, body: str) -> Item:
    return {"name": name, "type": type, "description": description, "body": body}


def user_message(text: str) -> Message:
    """As memstore.agent.loop sends it: a list of one text block."""
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def chat(user: str, reply: str, *extraction: Item) -> Turn:
    return Turn(
        "chat" if extraction else "small talk",
        [user_message(user), {"role": "assistant", "content": [{"type": "text", "text": reply}]}],
        list(extraction),
    )


def tools(user: str, calls: list[tuple[str, dict[str, Any], str]], reply: str) -> Turn:
    """A turn where the agent calls tools, one call per model step, then answers."""
    messages: list[Message] = [user_message(user)]
    for step, (name, arguments, output) in enumerate(calls):
        tool_id = f"toolu_{zlib.crc32(user.encode()):08x}{step:02d}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Running {name}."},
                    {"type": "tool_use", "id": tool_id, "name": name, "input": arguments},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": output}],
            }
        )
    messages.append({"role": "assistant", "content": [{"type": "text", "text": reply}]})
    return Turn(f"tools x{len(calls)}", messages)


def pytest_output(passed: int, failed: int = 0) -> str:
    lines = [f"tests/test_invoice.py::test_case_{i} PASSED" for i in range(passed)]
    lines += [f"tests/test_invoice.py::test_rounding_{i} FAILED" for i in range(failed)]
    if failed:
        lines.append("E   assert Decimal('10.01') == 10.005\nE    +  where 10.005 = round(...)")
    lines.append(f"==== {failed} failed, {passed} passed in 1.42s ====")
    return "\n".join(lines)


SOURCE = "\n".join(
    f"def line_total_{i}(quantity: int, unit_price: Decimal) -> Decimal:\n"
    f"    return (quantity * unit_price).quantize(CENT, rounding=ROUND_HALF_UP)\n"
    for i in range(25)
)


def conversation() -> list[Turn]:
    return [
        chat(
            "Hi, I'm Dana — I look after the billing service here. One ground rule before we "
            "start: write tests with pytest, never unittest.",
            "Nice to meet you, Dana. Noted: tests in pytest. What shall we look at first?",
            item(
                "user-role",
                "user",
                "Dana maintains the billing service",
                "The user is Dana, who looks after the billing service.",
            ),
            item(
                "prefers-pytest",
                "user",
                "Write tests with pytest, never unittest",
                "Dana wants every test written with pytest; never use unittest.",
            ),
        ),
        tools(
            "test_invoice_rounding is failing on main, can you find out why?",
            [
                ("bash", {"command": "pytest -q tests/test_invoice.py"}, pytest_output(46, 2)),
                ("read_file", {"path": "billing/invoice.py"}, SOURCE),
                ("edit_file", {"path": "billing/invoice.py", "old": "round(", "new": "q("}, "ok"),
                ("bash", {"command": "pytest -q tests/test_invoice.py"}, pytest_output(48)),
            ],
            "The totals were rounded as floats; they now use Decimal.quantize with "
            "ROUND_HALF_UP, and all 48 invoice tests pass.",
        ),
        chat(
            "Good. Heads-up: we never deploy billing on Fridays — the release freeze starts "
            "Friday at noon.",
            "Understood, no Friday deploys; I'll keep that in mind for releases.",
            item(
                "deploy-freeze-friday",
                "project",
                "No billing deploys from Friday noon",
                "The release freeze for billing starts Friday at noon: never deploy then.",
            ),
        ),
        chat(
            "Thanks! Long week already. How are you holding up?",
            "All good on my side — ready for the next bug whenever you are.",
        ),
        chat(
            "When you write Python here: 4-space indents, type hints on every public "
            "function, and keep lines under 100 characters.",
            "Will do: 4 spaces, typed public functions, lines under 100 characters.",
            item(
                "code-style",
                "user",
                "Python style: 4 spaces, type hints, 100-char lines",
                "4-space indents, type hints on every public function, lines under 100.",
            ),
        ),
        tools(
            "Where does staging read its database URL from? If it's wrong, the staging "
            "dashboard at https://grafana.example.internal/d/billing-staging shows connection "
            "errors.",
            [
                (
                    "grep",
                    {"pattern": "DATABASE_URL", "path": "."},
                    "billing/settings.py:12: DATABASE_URL = env('BILLING_DB_URL')\n"
                    "deploy/staging/values.yaml:40:   BILLING_DB_URL: from-secret",
                ),
                ("read_file", {"path": "deploy/staging/values.yaml"}, "env:\n" * 120),
            ],
            "settings.py reads BILLING_DB_URL, which the staging Helm values take from the "
            "billing-db secret; it looks right, and the dashboard shows no errors.",
        ),
        chat(
            "Small correction on tests: pytest yes, but with plain assert statements and "
            "fixtures in conftest.py — no test classes.",
            "Got it: plain asserts, fixtures in conftest.py, no test classes.",
            item(
                "prefers-pytest",
                "user",
                "pytest with plain asserts, fixtures, no classes",
                "Tests use pytest, never unittest: plain assert statements, fixtures in "
                "conftest.py, no test classes.",
            ),
        ),
        tools(
            "List the TODOs left in the ledger export code.",
            [
                (
                    "grep",
                    {"pattern": "TODO", "path": "billing/ledger"},
                    "\n".join(f"billing/ledger/export.py:{i * 7}: # TODO: {i}" for i in range(14)),
                )
            ],
            "There are 14 TODOs in billing/ledger/export.py, mostly about CSV quoting.",
        ),
        chat(
            "Billing tickets live in the BILL project on Jira. Put the ticket number at the "
            "start of every commit message, like 'BILL-123: fix rounding'.",
            "Noted: commit messages start with the BILL ticket number.",
            item(
                "billing-jira",
                "reference",
                "Billing tickets: BILL project on Jira",
                "Billing work is tracked in the BILL project on Jira.",
            ),
            item(
                "commit-ticket-prefix",
                "feedback",
                "Start commit messages with the ticket",
                "Every commit message starts with the BILL ticket number: 'BILL-123: ...'.",
            ),
        ),
        chat("haha the coffee machine on floor 3 died again", "Condolences to floor 3."),
        chat(
            "Remember, tests go in pytest — don't generate unittest.TestCase classes even "
            "where the old files use them.",
            "Right: new tests in pytest style even next to old unittest files.",
            item(
                "testing-framework-pytest",
                "user",
                "No unittest.TestCase, even in old files",
                "Write new tests in pytest, even where old files use unittest.TestCase.",
            ),
        ),
        tools(
            "Run the migrations against the local database and tell me if anything fails.",
            [
                (
                    "bash",
                    {"command": "alembic upgrade head"},
                    "\n".join(f"INFO  Running upgrade {i:04x} -> {i + 1:04x}" for i in range(30)),
                )
            ],
            "All 30 migrations ran cleanly against the local database.",
        ),
        chat(
            "The ledger module belongs to the payments team (Ravi Patel). Ask before changing "
            "anything under billing/ledger/.",
            "Understood — I'll check with you before touching billing/ledger/.",
            item(
                "ledger-owner",
                "project",
                "Payments team (Ravi Patel) owns billing/ledger",
                "The ledger module belongs to the payments team, Ravi Patel: ask before "
                "changing anything under billing/ledger/.",
            ),
        ),
        chat(
            "Correction to the style note: we're moving to 88-character lines, like black's "
            "default. Makefiles keep their tabs, of course.",
            "Updated: 88-character lines from now on; tabs only in Makefiles.",
            item(
                "code-style",
                "user",
                "Python style: 4 spaces, type hints, 88-char lines",
                "4-space indents (tabs only in Makefiles), type hints on every public "
                "function, lines under 88 characters.",
            ),
        ),
        tools(
            "Add a test for invoices with zero line items.",
            [
                ("edit_file", {"path": "tests/test_invoice.py", "append": "def test_empty"}, "ok"),
                ("bash", {"command": "pytest -q tests/test_invoice.py"}, pytest_output(49)),
            ],
            "Added test_empty_invoice_total_is_zero; 49 tests pass.",
        ),
        chat(
            "Change of plan from release management: the freeze now starts Thursday at 18:00, "
            "not Friday noon.",
            "Noted: no billing deploys from Thursday 18:00.",
            item(
                "release-freeze",
                "project",
                "Release freeze starts Thursday 18:00",
                "The billing release freeze now starts Thursday at 18:00.",
            ),
        ),
        chat("perfect, thanks!", "You're welcome!"),
        chat(
            "Production API keys are in the 1Password vault 'billing-prod'. Never paste them "
            "into code or chat.",
            "Understood: I'll point to the billing-prod vault and never copy keys.",
            item(
                "secrets-location",
                "reference",
                "Production keys: 1Password 'billing-prod'",
                "Production API keys are kept in the 1Password vault 'billing-prod'; never "
                "paste them into code or chat.",
            ),
        ),
        tools(
            "Why is the nightly reconciliation job slow?",
            [
                (
                    "bash",
                    {"command": "kubectl logs job/reconcile --tail 200"},
                    "\n".join(f"12:{i:02d} fetched page {i} of 180 (2.1s)" for i in range(60)),
                ),
                ("read_file", {"path": "billing/reconcile.py"}, SOURCE),
            ],
            "It fetches 180 pages one after another at about 2 s each; batching the "
            "requests would bring it from 6 minutes to under one.",
        ),
        chat(
            "For commit messages: imperative mood, and keep the subject under 60 characters.",
            "Will do: imperative subjects under 60 characters.",
            item(
                "commit-style",
                "feedback",
                "Commit subjects: imperative, under 60 chars",
                "Commit message subjects are in the imperative mood, under 60 characters.",
            ),
        ),
        tools(
            "Bump the stripe SDK to the latest 7.x and run the tests.",
            [
                ("edit_file", {"path": "pyproject.toml", "old": "stripe>=7.1", "new": "7.9"}, "ok"),
                ("bash", {"command": "pip install -e . && pytest -q"}, pytest_output(212)),
            ],
            "stripe is now 7.9; the whole suite (212 tests) passes.",
        ),
        chat(
            "We decided to drop Python 3.10 support at the end of Q3.",
            "Noted: Python 3.10 support ends after Q3.",
            item(
                "python-support",
                "project",
                "Python 3.10 support ends at the end of Q3",
                "The team decided to drop Python 3.10 support at the end of Q3.",
            ),
        ),
        chat("Do you ever get bored of invoices?", "Never — every rounding bug is a new puzzle."),
        tools(
            "Update: dropping 3.10 moved up to the end of Q2. Which CI jobs still run on it?",
            [
                (
                    "grep",
                    {"pattern": "3.10", "path": ".github/workflows"},
                    ".github/workflows/ci.yml:14: python: ['3.10', '3.11', '3.12']",
                )
            ],
            "Only the test matrix in ci.yml still has 3.10; I can remove it when you say so.",
        ),
        chat(
            "The on-call rotation for billing is in PagerDuty under 'Billing Primary'.",
            "Thanks — I'll refer to the Billing Primary schedule for on-call questions.",
            item(
                "oncall-rotation",
                "reference",
                "Billing on-call: PagerDuty 'Billing Primary'",
                "The billing on-call rotation is in PagerDuty under 'Billing Primary'.",
            ),
        ),
        tools(
            "Profile the invoice PDF renderer on the big customer's March invoice.",
            [
                (
                    "bash",
                    {"command": "python -m cProfile -s cumtime scripts/render.py 4711"},
                    "\n".join(f"{i:>6} 0.{i:03d} billing/pdf.py:{i}(draw)" for i in range(80)),
                )
            ],
            "Most of the time goes to font loading on every page; caching the font cuts the "
            "render from 4.1 s to 0.6 s.",
        ),
        chat(
            "Also: please ask me before adding any new dependency to pyproject.",
            "Will do — I'll ask before adding dependencies.",
            item(
                "ask-before-dependencies",
                "feedback",
                "Ask before adding a dependency",
                "Ask Dana before adding any new dependency to pyproject.toml.",
            ),
        ),
        chat(
            "Tweak to commit messages: the ticket goes in brackets now, '[BILL-123] Fix rounding'.",
            "Noted: '[BILL-123] Subject' from now on.",
            item(
                "commit-messages",
                "feedback",
                "Commits: '[BILL-123] Imperative subject'",
                "Commit messages start with the ticket in brackets, '[BILL-123] Fix "
                "rounding', then an imperative subject under 60 characters.",
            ),
        ),
        tools(
            "Run the full test suite one last time.",
            [("bash", {"command": "pytest -q"}, pytest_output(213))],
            "All 213 tests pass.",
        ),
        chat("That's all for today, thanks — have a good evening!", "You too, Dana!"),
    ]


# What the scripted consolidation merges: the members of a group that are in the request, when
# there are at least two, into the group's memory (a member that has the result's name is
# updated in place).
DUPLICATES = [
    (
        ["prefers-pytest", "testing-framework-pytest"],
        item("prefers-pytest", "user", "pytest with plain asserts, fixtures, no classes",
             "Tests use pytest, never unittest (not even next to old TestCase files): "
             "plain assert statements, fixtures in conftest.py, no test classes."),
    ),
    (
        ["deploy-freeze-friday", "release-freeze"],
        item("release-freeze", "project", "Release freeze starts Thursday 18:00",
             "The billing release freeze starts Thursday at 18:00 (it used to be Friday "
             "noon): never deploy after that."),
    ),
    (
        ["commit-ticket-prefix", "commit-style", "commit-messages"],
        item("commit-messages", "feedback", "Commits: ticket first, imperative subject",
             "Commit messages start with the BILL ticket number, then an imperative subject "
             "under 60 characters."),
    ),
]  # fmt: skip


# --preload: memories from earlier sessions, none a duplicate of another.
PRELOAD_TOPICS = [
    "retry policy for the Stripe webhook", "currency table refresh job", "VAT rules for EU "
    "customers", "invoice PDF template owner", "staging database reset schedule", "feature "
    "flag service", "dunning e-mail cadence", "credit note numbering", "ledger export format",
    "customer portal login flow", "tax report deadline", "refund approval limit",
]  # fmt: skip
PRELOAD_TYPES = ("project", "reference", "feedback", "user")


def preload(store: MemoryStore, count: int) -> None:
    """`count` memories written before the session, then a (empty) consolidation run, as if
    the store had been tidied at the end of the last session."""
    with store.transaction(actor="import", command="bench preload") as tx:
        for i in range(count):
            topic = PRELOAD_TOPICS[i % len(PRELOAD_TOPICS)]
            tx.create(
                f"earlier-note-{i:03d}",
                PRELOAD_TYPES[i % len(PRELOAD_TYPES)],
                f"Note {i} on the {topic}",
                f"What we settled in session {i} about the {topic}, in a few sentences "
                f"that a future session will want to know. " * 3,
            )
    with store.transaction(actor=CONSOLIDATION_ACTOR, command="bench") as tx:
        tx.record_run()


def consolidation_plan(prompt: str) -> dict[str, Any]:
    shown = {line[4:].split(" (")[0] for line in prompt.splitlines() if line.startswith("### ")}
    merges = []
    for group, result in DUPLICATES:
        sources = [name for name in group if name in shown]
        if len(sources) >= 2:
            merges.append({"sources": sources, **result})
    return {"merge": merges, "drop": []}


# -- the scripted model ---------------------------------------------------------------------


def kind_of(payload: dict[str, Any]) -> str:
    system = payload.get("system")
    if system == SELECTION_SYSTEM:
        return "selection"
    if system == EXTRACTION_SYSTEM.format(max_items=MAX_ITEMS_PER_TURN):
        return "extraction"
    if system == CONSOLIDATION_SYSTEM:
        return "consolidation"
    return "other"


class ScriptedModel(list[ScriptedReply]):
    """Stands in for the server's reply list: each reply is made from the request just
    recorded, by its system prompt (the server pops one reply per request)."""

    def __init__(self, server: AnthropicServer) -> None:
        super().__init__()
        self.server = server
        self.extraction: list[Item] = []

    def __bool__(self) -> bool:
        return True

    def pop(self, index: Any = -1) -> ScriptedReply:
        payload = self.server.requests[-1]
        kind = kind_of(payload)
        if kind == "selection":
            return text_reply("[0]")
        if kind == "extraction":
            return text_reply(json.dumps(self.extraction))
        if kind == "consolidation":
            return text_reply(json.dumps(consolidation_plan(payload["messages"][0]["content"])))
        return error_reply(400, "invalid_request_error", "not a memstore request")


# -- measuring ------------------------------------------------------------------------------


@dataclass
class TurnFigures:
    calls: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    memories: int = 0
    wall_s: float = 0.0
    model_s: float = 0.0
    # What consolidation did on this turn ("" when it was not asked for).
    consolidation: str = ""


@dataclass
class RunFigures:
    name: str
    preloaded: int = 0
    turns: list[TurnFigures] = field(default_factory=list)
    final_names: list[str] = field(default_factory=list)

    def total(self, what: str, kind: str | None = None) -> int:
        kinds = KINDS if kind is None else (kind,)
        return sum(getattr(t, what)[k] for t in self.turns for k in kinds)


class ModelClock:
    """Time spent inside memstore's model calls (the SDK, the localhost round trip and the
    scripted server), measured by wrapping ask_text where recall, extraction and
    consolidation look it up."""

    MODULES = (memstore.recall.selection, memstore.learning.extract, memstore.learning.consolidate)

    def __init__(self) -> None:
        self.seconds = 0.0

    @contextmanager
    def installed(self) -> Iterator[None]:
        originals = [module.ask_text for module in self.MODULES]

        def timed(original: Callable[..., str]) -> Callable[..., str]:
            def ask_text(*args: Any, **kwargs: Any) -> str:
                start = time.perf_counter()
                try:
                    return original(*args, **kwargs)
                finally:
                    self.seconds += time.perf_counter() - start

            return ask_text

        for module, original in zip(self.MODULES, originals, strict=True):
            module.ask_text = timed(original)  # type: ignore[attr-defined]
        try:
            yield
        finally:
            for module, original in zip(self.MODULES, originals, strict=True):
                module.ask_text = original  # type: ignore[attr-defined]


# One turn of memory work: (messages up to the user's message, the whole turn) -> what
# consolidation did ("" when it was not asked for).
Rules = Callable[[list[Message], list[Message]], str]


def outcome_note(consolidation: Consolidation) -> str:
    plan = consolidation.plan
    if not consolidation.applied:
        return f"nothing to merge ({plan.before} memories)"
    return f"merged {len(plan.merges)} group(s): {plan.before} -> {plan.after} memories"


def memstore_rules(store: MemoryStore, client: Anthropic, export_dir: Path) -> Rules:
    memory = AgentMemory(store, client, session_id=SESSION, export_dir=export_dir)

    def turn(before: list[Message], after: list[Message]) -> str:
        memory.before_turn(before)
        # (the agent's own model calls, with the block injected, would happen here)
        learning = memory.after_turn(after)
        if learning.consolidation is not None:
            return f"{outcome_note(learning.consolidation)} [due: {learning.consolidation_reason}]"
        if learning.consolidation_failure:
            return f"{learning.consolidation_failure} [due: {learning.consolidation_reason}]"
        if learning.consolidation_reason:
            return f"due ({learning.consolidation_reason}) but waiting after a failure"
        return ""

    return turn


def seed_rules(store: MemoryStore, client: Anthropic, export_dir: Path, threshold: int) -> Rules:
    def turn(before: list[Message], after: list[Message]) -> str:
        chosen = recall(before, MAX_RECALLED, store=store, client=client)
        memories_block([m for m in (store.find(n) for n in chosen.names) if m is not None])
        changed = extract_memories(after, store=store, client=client, session_id=SESSION).changed
        note = ""
        if store.count() >= threshold:
            try:
                outcome = consolidate_memories(store=store, client=client, confirmed=True)
                changed = changed or outcome.applied
                note = outcome_note(outcome)
            except ConsolidationRefused as error:
                note = str(error)
        if changed:
            try:
                export_memories(store, export_dir)
            except MemstoreError as error:
                print(f"export failed: {error}", file=sys.stderr)
        return note

    return turn


def run_conversation(
    name: str, turns: list[Turn], seed_threshold: int, preloaded: int
) -> RunFigures:
    run = RunFigures(name, preloaded)
    clock = ModelClock()
    with (
        tempfile.TemporaryDirectory() as work,
        contextmanager(serve)() as server,
        MemoryStore(Path(work) / "memstore.db") as store,
        clock.installed(),
    ):
        if preloaded:
            preload(store, preloaded)
        model = ScriptedModel(server)
        server.replies = model
        client = make_client(api_key="bench", base_url=server.url)
        assert client is not None
        export_dir = Path(work) / ".memory"
        if name == "memstore":
            rules = memstore_rules(store, client, export_dir)
        else:
            rules = seed_rules(store, client, export_dir, seed_threshold)
        messages: list[Message] = []
        for turn in turns:
            model.extraction = turn.extraction
            first_request = len(server.requests)
            model_before = clock.seconds
            start = time.perf_counter()
            before = [*messages, turn.messages[0]]
            messages.extend(turn.messages)
            note = rules(before, list(messages))
            figures = TurnFigures(wall_s=time.perf_counter() - start, consolidation=note)
            figures.model_s = clock.seconds - model_before
            for payload, headers in zip(
                server.requests[first_request:], server.headers[first_request:], strict=True
            ):
                kind = kind_of(payload)
                if kind not in KINDS:
                    raise RuntimeError(f"unexpected request: {payload.get('system')!r:.80}")
                figures.calls[kind] += 1
                figures.bytes[kind] += int(headers["content-length"])
            figures.memories = store.count()
            run.turns.append(figures)
        run.final_names = [m.name for m in store.summaries()]
    return run


# -- report ---------------------------------------------------------------------------------


def cell(figures: TurnFigures) -> str:
    c = figures.calls
    total = sum(figures.bytes.values())
    return (
        f"{c['selection']:>3} {c['extraction']:>3} {c['consolidation']:>3} "
        f"{total:>8,} {figures.memories:>4}"
    )


def print_table(turns: list[Turn], ours: RunFigures, seed: RunFigures) -> None:
    head = f"{'sel':>3} {'ext':>3} {'con':>3} {'bytes':>8} {'mem':>4}"
    print(f"{'':17}| {'memstore rules':<26}| seed rules")
    print(f"{'turn':>4}  {'kind':<11}| {head} | {head}")
    for number, (turn, a, b) in enumerate(zip(turns, ours.turns, seed.turns, strict=True), 1):
        print(f"{number:>4}  {turn.label:<11}| {cell(a)} | {cell(b)}")


def ratio(seed: float, ours: float) -> str:
    if ours == 0:
        return "-" if seed == 0 else "inf"
    return f"{seed / ours:.2f}x"


def print_totals(turns: list[Turn], ours: RunFigures, seed: RunFigures) -> None:
    start = f", from {ours.preloaded} memories" if ours.preloaded else ""
    print(f"\n== totals over {len(turns)} turns{start} (model {small_model_name()}; request")
    print("   bytes = Content-Length of the JSON body as sent; the agent's own calls excluded)")
    print(f"{'':15}{'memstore rules':>24}{'seed rules':>24}{'seed/memstore':>22}")
    for kind in (*KINDS, None):
        label = kind or "all"
        row = f"  {label:<13}"
        for run in (ours, seed):
            row += f"{run.total('calls', kind):>6} calls {run.total('bytes', kind):>10,} B"
        row += f"   {ratio(seed.total('calls', kind), ours.total('calls', kind)):>7} calls"
        row += f" {ratio(seed.total('bytes', kind), ours.total('bytes', kind)):>7} B"
        print(row)
    for run in (ours, seed):
        per_turn = run.total("bytes") / len(run.turns)
        wall = sum(t.wall_s for t in run.turns)
        model = sum(t.model_s for t in run.turns)
        print(f"  {run.name:<9} final memories {len(run.final_names)}; {per_turn:,.0f} B per turn")
        print(
            f"  {'':<9} wall {wall * 1000:.0f} ms, of it in model calls (SDK + localhost) "
            f"{model * 1000:.0f} ms; non-model work {(wall - model) * 1000:.0f} ms "
            f"({(wall - model) * 1000 / len(run.turns):.1f} ms per turn)"
        )
    for run in (ours, seed):
        print(f"\n== consolidation under {run.name} rules")
        for number, figures in enumerate(run.turns, 1):
            if figures.consolidation:
                print(f"  turn {number:>2}: {figures.consolidation}")
    if ours.final_names != seed.final_names:
        only_ours = sorted(set(ours.final_names) - set(seed.final_names))
        only_seed = sorted(set(seed.final_names) - set(ours.final_names))
        print(f"  final memories differ: memstore only {only_ours}, seed only {only_seed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--totals", action="store_true", help="totals only, no per-turn table")
    parser.add_argument(
        "--seed-threshold",
        type=int,
        default=10,
        help="memories at which the seed consolidates on every turn (default 10)",
    )
    parser.add_argument(
        "--preload",
        type=int,
        default=0,
        metavar="N",
        help="start from a store of N memories from earlier sessions, already consolidated",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="  (log) %(name)s: %(message)s")
    turns = conversation()
    # Warm up (imports, the first connection) so that neither timed run pays for it.
    run_conversation("seed", turns[:2], args.seed_threshold, 0)
    ours = run_conversation("memstore", turns, args.seed_threshold, args.preload)
    seed = run_conversation("seed", turns, args.seed_threshold, args.preload)
    if not args.totals:
        print_table(turns, ours, seed)
    print_totals(turns, ours, seed)


if __name__ == "__main__":
    main()
