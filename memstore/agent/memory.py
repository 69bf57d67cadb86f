"""The agent's memory around each user turn: recall before it, learning after it.

Before a turn: recall picks the memories for the turn (model selection, keyword fallback)
and renders the block injected into a copy of the user's message. After the turn: extraction
reads the whole turn (final reply included); consolidation runs only when its rule says so
(memstore.learning.consolidation_due); `.memory/` is re-exported after any change.
Nothing here raises for a model or export failure: the turn goes on, the reason is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstore.errors import ConsolidationSkipped, MemstoreError
from memstore.learning.consolidate import MAX_MEMORIES, Consolidation, consolidate_memories
from memstore.learning.consolidation_due import MIN_CHANGES, THRESHOLD, consolidation_due
from memstore.learning.extract import Extraction, extract_memories
from memstore.llm.client import ModelClient, Usage
from memstore.recall.block import memories_block
from memstore.recall.turn import Recall, RecallPath, recall
from memstore.storage.store import MemoryStore

if TYPE_CHECKING:
    from memstore.recall.vectors import SemanticIndex

log = logging.getLogger(__name__)


@dataclass
class MemorySettings:
    """How the agent uses memory; every number here is documented in docs/chat.md."""

    max_recalled: int = 5
    consolidation_threshold: int = THRESHOLD
    max_memories: int = MAX_MEMORIES
    min_changes: int = MIN_CHANGES


@dataclass
class TurnRecall:
    recall: Recall
    # The <relevant_memories> block for the turn ("" when nothing was recalled).
    block: str


@dataclass
class TurnLearning:
    extraction: Extraction
    # Why consolidation was due (None when it was not; it may still not have run: no client,
    # or waiting after a refusal), and what it did when it ran.
    consolidation_reason: str | None = None
    consolidation: Consolidation | None = None
    consolidation_failure: str = ""
    # Why it did not run though due: another consolidation of the store was running (another
    # agent or machine). It is still due, so a later turn tries again.
    consolidation_skipped: str = ""
    exported: bool = False
    export_failure: str = ""
    # One line each, for the user: e.g. that a read-only store learns nothing.
    notes: list[str] = field(default_factory=list)


class AgentMemory:
    def __init__(
        self,
        store: MemoryStore,
        client: ModelClient | None,
        *,
        session_id: str,
        export_dir: Path | None,
        settings: MemorySettings | None = None,
        semantic: SemanticIndex | None = None,
    ) -> None:
        self.store = store
        # The store's vectors, when recall may compare memories in meaning too.
        self.semantic = semantic
        self.client = client
        self.session_id = session_id
        self.export_dir = export_dir
        self.settings = settings or MemorySettings()
        # After a consolidation fails or is refused, wait for this many more changes before
        # asking again, rather than paying for the same refusal on every turn.
        self._changes_before_retry = 0
        # Whether the user was told that a read-only store learns nothing (once a session).
        self._read_only_said = False

    def before_turn(
        self, messages: Sequence[Mapping[str, Any]], *, usage: Usage | None = None
    ) -> TurnRecall:
        """The memories for the turn; when recall itself fails (a locked database, a memory
        it cannot handle), none, with the reason logged: memory never breaks a turn. The
        model's calls are counted in `usage` when given."""
        client = self._client(usage)
        try:
            chosen = recall(
                messages,
                self.settings.max_recalled,
                store=self.store,
                client=client,
                semantic=self.semantic,
            )
            found = (self.store.find(name) for name in chosen.names)
            # A memory changed outside memstore is left out (a line on stderr names it).
            shown = self.store.unaltered(m for m in found if m is not None)
            return TurnRecall(chosen, memories_block(shown))
        except (MemstoreError, RecursionError, ValueError, TypeError) as error:
            log.warning("recall failed, no memories this turn: %s: %s", type(error).__name__, error)
            return TurnRecall(Recall([], RecallPath.NONE, reason=f"recall failed: {error}"), "")

    def after_turn(
        self, messages: Sequence[Mapping[str, Any]], *, usage: Usage | None = None
    ) -> TurnLearning:
        """Learn from the turn and consolidate when due; the model's calls are counted in
        `usage` when given."""
        if self.store.read_only:  # nothing could be saved: the model is not asked either
            learning = TurnLearning(Extraction())
            if not self._read_only_said:
                self._read_only_said = True
                learning.notes.append(
                    f"the memory store {self.store.location} is read-only: recall works, but"
                    " nothing is learned this session"
                )
            return learning
        client = self._client(usage)
        try:
            extraction = extract_memories(
                messages,
                store=self.store,
                client=client,
                session_id=self.session_id,
                semantic=self.semantic,
            )
        except (MemstoreError, RecursionError, ValueError, TypeError) as error:
            # e.g. the database is locked by another writer, or a memory cannot be read
            log.warning("extraction failed: %s", error)
            extraction = Extraction(failure=str(error))
        learning = TurnLearning(extraction)
        extraction = learning.extraction
        changed = extraction.changed
        settings = self.settings
        self._changes_before_retry -= len(extraction.created) + len(extraction.updated)
        if client is None:  # consolidation needs the model
            if changed:
                self.export(learning)
            return learning
        learning.consolidation_reason = consolidation_due(
            self.store,
            threshold=settings.consolidation_threshold,
            max_memories=settings.max_memories,
            min_changes=settings.min_changes,
        )
        if learning.consolidation_reason and self._changes_before_retry <= 0:
            try:
                learning.consolidation = consolidate_memories(
                    store=self.store, client=client, max_memories=settings.max_memories
                )
                changed = changed or learning.consolidation.applied
            except ConsolidationSkipped as skipped:
                learning.consolidation_skipped = f"{skipped}; it runs again when due"
                log.info("%s", skipped)
            except (MemstoreError, RecursionError, ValueError, TypeError) as error:
                learning.consolidation_failure = str(error)
                self._changes_before_retry = settings.min_changes
                log.warning("%s", error)
        if changed:
            self.export(learning)
        return learning

    def _client(self, usage: Usage | None) -> ModelClient | None:
        if self.client is None or usage is None:
            return self.client
        return self.client.counting(usage)

    def export(self, learning: TurnLearning) -> None:
        if self.export_dir is None:
            return
        from memstore.files.exporter import export_memories

        try:
            export_memories(self.store, self.export_dir)
            learning.exported = True
        except (MemstoreError, RecursionError, ValueError, TypeError) as error:
            # e.g. a hand-edited file (the database has it all), or a memory it cannot write
            learning.export_failure = str(error)
            log.warning("export after the turn failed: %s", error)
