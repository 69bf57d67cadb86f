"""Undo (storage/undo.py) brings back every field of a memory, as the definition
(storage/fields.py) declares them: a field added there is covered here with no edit."""

from __future__ import annotations

from typing import Any

import pytest

from memstore.storage.fields import CLEAR, CONTENT, OPTIONAL, RULES
from memstore.storage.store import MemoryStore
from memstore.storage.undo import undo_run

pytestmark = pytest.mark.both_engines


def example(which: int) -> dict[str, Any]:
    """A valid value of every field: the first or the second of its examples."""
    return {name: rule.examples[which] for name, rule in RULES.items()}


def without_optional() -> dict[str, Any]:
    """The first examples, with every optional field left without a value."""
    return {**example(0), **dict.fromkeys(OPTIONAL)}


def values_of(store: MemoryStore, name: str) -> dict[str, Any]:
    memory = store.get(name)
    return {field: getattr(memory, field) for field in CONTENT}


@pytest.mark.parametrize(
    ("before", "after"),
    [(example(0), example(1)), (example(1), example(0)), (without_optional(), example(1))],
    ids=["first-to-second", "second-to-first", "none-to-some"],
)
def test_undo_restores_every_field_of_the_definition(
    store: MemoryStore, before: dict[str, Any], after: dict[str, Any]
) -> None:
    store.create(**before)
    with store.transaction(actor="editor") as tx:
        tx.update(tx.get(before["name"]), **after)
        run_id = tx.run_id
    changed = values_of(store, after["name"])
    assert changed == after
    assert all(changed[field] != before[field] for field in CONTENT)
    undo_run(store, run_id)
    assert values_of(store, before["name"]) == before


def test_undo_empties_an_optional_field_the_run_set(store: MemoryStore) -> None:
    """Clearing goes through the same road: a run that emptied fields is undone too."""
    store.create(**example(1))
    clear = {field: CLEAR for field in (*OPTIONAL, "extra")}
    with store.transaction(actor="editor") as tx:
        tx.update(tx.get(example(1)["name"]), **clear)
        run_id = tx.run_id
    emptied = values_of(store, example(1)["name"])
    assert all(emptied[field] in (None, {}) for field in clear)
    undo_run(store, run_id)
    assert values_of(store, example(1)["name"]) == example(1)


def test_undo_of_a_deletion_brings_back_every_field(store: MemoryStore) -> None:
    store.create(**example(1))
    with store.transaction(actor="editor") as tx:
        tx.delete(tx.get(example(1)["name"]))
        run_id = tx.run_id
    assert store.find(example(1)["name"]) is None
    undo_run(store, run_id)
    assert values_of(store, example(1)["name"]) == example(1)


def test_a_name_purged_again_erases_only_what_came_since(store: MemoryStore) -> None:
    """`deploy` purged, the name used again, purged again: the second purge erases the new
    memory only (the first's markers stay the hashes of what it said), and history still
    verifies; a third finds nothing more to erase."""
    from memstore.errors import AlreadyPurged

    store.create("deploy", "project", "First", "The first deploy notes.")
    store.purge("deploy")
    store.create("deploy", "project", "Second", "The second deploy notes.")
    second = store.purge("deploy")
    assert (second.memories, second.events) == (1, 2)  # its create, and the delete before
    store.history.verify()
    with pytest.raises(AlreadyPurged, match="'deploy' was purged already"):
        store.purge("deploy")
    store.history.verify()
