"""A memory's fields are declared once (storage/fields.py): the table, writes, the canonical
file, import and export, the memory tool and the MCP results derive from the definition, and
"live" is one condition. These tests iterate the definition: a new field is covered by them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import memstore
from memstore.errors import InvalidMemory
from memstore.files.exporter import export_memories
from memstore.files.format import memory_fields, parse_memory_text, render_memory_file
from memstore.files.importer import import_memories
from memstore.integrations.mcp_results import ShownMemory
from memstore.storage import fields
from memstore.storage.fields import CLEAR, CONTENT, FRONTMATTER_KEYS, OPTIONAL, RULES, Place
from memstore.storage.models import memory_table
from memstore.storage.reader import StoreReader
from memstore.storage.store import MemoryStore
from tests.conftest import MemctlRunner


def example(which: int) -> dict[str, Any]:
    return {name: rule.examples[which] for name, rule in RULES.items()}


def values_of(store: MemoryStore, name: str) -> dict[str, Any]:
    memory = store.get(name)
    return {field: getattr(memory, field) for field in CONTENT}


def test_the_memory_table_has_the_definitions_columns() -> None:
    assert tuple(memory_table.c.keys()) == fields.RECORD_COLUMNS
    for name in OPTIONAL:
        assert memory_table.c[name].nullable


def test_every_field_has_two_different_valid_examples() -> None:
    for name, rule in RULES.items():
        first, second = rule.examples
        assert first != second, name
        assert rule.check(first) == first and rule.check(second) == second, name


def test_update_clears_a_field_with_clear_and_leaves_it_with_none(store: MemoryStore) -> None:
    memory = store.create(**example(1))
    assert store.update(memory.name, extra=None) == memory  # None: left as it is
    cleared = store.update(memory.name, extra=CLEAR)
    assert cleared.extra == {} and cleared.version == memory.version + 1
    assert store.history.events()[-1].new_value == {**example(1), "extra": {}}


@pytest.mark.parametrize("field", sorted(fields.REQUIRED_FIELDS))
def test_a_required_field_cannot_be_cleared(store: MemoryStore, field: str) -> None:
    memory = store.create(**example(1))
    with (
        pytest.raises(InvalidMemory, match=f"invalid {field}: must not be cleared"),
        store.transaction() as tx,
    ):
        tx.update(tx.get(memory.name), **{field: CLEAR})
    assert store.get(memory.name) == memory


def test_an_unknown_field_is_refused_as_an_unknown_keyword(store: MemoryStore) -> None:
    memory = store.create(**example(1))
    with pytest.raises(TypeError, match="no field 'colour'"):
        store.update(memory.name, colour="blue")


def test_a_snapshot_is_every_field_that_has_a_value() -> None:
    record = fields.MemoryRecord(id=1, **example(1), version=1, created_at="t", updated_at="t")
    assert record.snapshot() == example(1)
    assert list(record.snapshot()) == list(CONTENT)


def test_the_canonical_file_holds_every_field_and_reads_back_as_it() -> None:
    record = fields.MemoryRecord(id=1, **example(1), version=1, created_at="t", updated_at="t")
    text = render_memory_file(record)
    parsed = parse_memory_text(text)
    extra_keys = list(example(1)["extra"])
    assert list(parsed.metadata) == [*FRONTMATTER_KEYS, *extra_keys]
    read = memory_fields(text)
    assert read == example(1)
    body = next(name for name, rule in RULES.items() if rule.place is Place.BODY)
    assert parsed.body == example(1)[body]


def test_an_optional_field_without_a_value_is_cleared_by_the_edited_text() -> None:
    record = fields.MemoryRecord(id=1, **example(1), version=1, created_at="t", updated_at="t")
    text = render_memory_file(record)
    for name in OPTIONAL:
        text = re.sub(rf"(?m)^{name}:.*\n", "", text)
    read = memory_fields(text)
    assert all(read[name] is CLEAR for name in OPTIONAL)


def test_export_then_import_keeps_every_field(tmp_path: Path) -> None:
    folder = tmp_path / "memories"
    with MemoryStore(tmp_path / "one.db") as one:
        one.create(**example(1))
        export_memories(one, folder)
    with MemoryStore(tmp_path / "two.db") as two:
        report = import_memories(two, folder)
        assert report.created == [example(1)["name"]]
        assert values_of(two, example(1)["name"]) == example(1)


def test_importing_a_changed_file_changes_every_field(tmp_path: Path) -> None:
    """Import updates a memory from its file: every field the file says, changed or cleared."""
    folder = tmp_path / "memories"
    with MemoryStore(tmp_path / "one.db") as store:
        second = {**example(1), "name": example(0)["name"]}
        store.create(**second)
        export_memories(store, folder)
        later = fields.MemoryRecord(id=1, **example(0), version=1, created_at="t", updated_at="t")
        (folder / f"{later.name}.md").write_text(render_memory_file(later))
        report = import_memories(store, folder)
        assert report.updated == [later.name]
        assert values_of(store, later.name) == example(0)


def test_the_mcp_show_result_is_read_from_the_record(store: MemoryStore) -> None:
    memory = store.create(**example(1))
    shown = ShownMemory.of_record(memory)
    for name in ShownMemory.model_fields:
        if name != "text":
            assert getattr(shown, name) == getattr(memory, name)
    assert shown.text == render_memory_file(memory)


def test_a_read_on_the_dbapi_connection_gives_every_field(store: MemoryStore) -> None:
    memory = store.create(**example(1))
    assert store.path is not None
    with StoreReader(store.path) as reader:
        assert reader.by_ids([memory.id]) == {memory.id: memory}


# "Live" is said once, in storage/fields.py: any other spelling of it is a second definition.
_LIVE_SPELLED = re.compile(r"deleted_at\s+IS\s+NULL|deleted_at\.is_\(None\)", re.IGNORECASE)


def test_live_is_one_condition_defined_once() -> None:
    package = Path(memstore.__file__).parent
    spelled = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if "migrations" not in path.parts and _LIVE_SPELLED.search(path.read_text())
    ]
    assert spelled == ["storage/fields.py"]


def test_memctl_history_says_which_field_each_update_changed(
    memctl: MemctlRunner, workspace_database: Path | str
) -> None:
    with MemoryStore(workspace_database) as store:
        memory = store.create(**example(0))
        for field in CONTENT:  # one run each (a name is a field too: update's own word)
            with store.transaction() as tx:
                memory = tx.update(tx.get(memory.name), **{field: example(1)[field]})
    changes = [line for line in memctl("history").stdout.splitlines()[1:] if " update " in line]
    assert len(changes) == len(CONTENT)
    for field, line in zip(CONTENT, changes, strict=True):
        assert f"{field}: " in line or f"{field} changed" in line, (field, line)
