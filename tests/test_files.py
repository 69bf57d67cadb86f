"""The canonical file format and the MEMORY.md index."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore.files.exporter import export_memories
from memstore.files.format import (
    INDEX_MAX_BYTES,
    INDEX_MAX_LINES,
    UnreadableFile,
    _read_plain_frontmatter,
    _TextLoader,
    parse_memory_text,
    render_index,
    render_memory_file,
)
from memstore.files.importer import import_memories
from memstore.storage.models import MemorySummary
from memstore.storage.store import MemoryStore
from memstore.storage.validation import check_body, check_description


def test_canonical_format_is_exactly_the_design(store: MemoryStore) -> None:
    memory = store.create(
        "user-preference-tabs",
        "user",
        "User wants 4-space indentation, never tabs",
        "The user asked that all Python code use 4 spaces and never tab characters.",
    )
    assert render_memory_file(memory) == (
        "---\n"
        "name: user-preference-tabs\n"
        "description: User wants 4-space indentation, never tabs\n"
        "type: user\n"
        "---\n"
        "\n"
        "The user asked that all Python code use 4 spaces and never tab characters.\n"
    )


@pytest.mark.parametrize(
    "description",
    ["yes", "123", "null", "- starts like a list", "#hash", "a: b", "'quoted", "emoji 🎉 ok", "~"],
)
def test_yaml_special_descriptions_are_quoted_and_read_back(
    store: MemoryStore, description: str
) -> None:
    memory = store.create("special", "project", description, "body")
    parsed = parse_memory_text(render_memory_file(memory))
    assert parsed.metadata["description"] == description
    assert not parsed.lenient_yaml


def test_emoji_are_written_as_themselves(store: MemoryStore) -> None:
    memory = store.create("party", "project", "release party 🎉", "🎉 body")
    assert "release party 🎉" in render_memory_file(memory)


def test_reading_tolerates_crlf_bom_and_missing_blank_line() -> None:
    text = "\ufeff---\r\nname: a\r\ndescription: d\r\ntype: user\r\n---\r\nbody line\r\n"
    parsed = parse_memory_text(text)
    assert parsed.metadata == {"name": "a", "description": "d", "type": "user"}
    assert parsed.body == "body line"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("just text", "no frontmatter"),
        ("---\nname: a\nbody without end", "no closing"),
        ("---\n- a\n- b\n---\nbody", "not a mapping"),
        ("---\n{{{ not yaml\n---\nbody", "not readable YAML"),
    ],
)
def test_unreadable_texts_say_why(text: str, reason: str) -> None:
    with pytest.raises(UnreadableFile, match=reason):
        parse_memory_text(text)


def test_lenient_reading_of_unquoted_colon() -> None:
    parsed = parse_memory_text(
        "---\nname: x\ndescription: Rule: never push to main\ntype: feedback\n---\nbody"
    )
    assert parsed.lenient_yaml
    assert parsed.metadata["description"] == "Rule: never push to main"


def test_timestamps_stay_as_written() -> None:
    parsed = parse_memory_text(
        "---\nname: x\ndescription: d\ntype: user\nmodified: 2026-03-04T10:22:31.000Z\n---\nb"
    )
    assert parsed.metadata["modified"] == "2026-03-04T10:22:31.000Z"


def entries(count: int, description: str = "a memory") -> list[MemorySummary]:
    return [MemorySummary(f"memory-{i:04d}", "project", description) for i in range(count)]


def test_index_lines_and_order() -> None:
    text = render_index(
        [
            MemorySummary("zeta", "project", "z"),
            MemorySummary("alpha", "reference", "a"),
            MemorySummary("mine", "user", "u"),
        ]
    )
    assert text == ("- [mine](mine.md) — u\n- [zeta](zeta.md) — z\n- [alpha](alpha.md) — a\n")


def test_index_is_capped_at_200_lines_with_a_note() -> None:
    text = render_index(entries(250))
    lines = text.splitlines()
    assert len(lines) == INDEX_MAX_LINES
    assert "51 more memories are not listed" in lines[-1]
    assert render_index(entries(200)).count("\n") == 200  # exactly at the cap: no note


def test_index_is_capped_at_25000_bytes_with_a_note() -> None:
    text = render_index(entries(190, "长" * 140))
    assert len(text.encode()) <= INDEX_MAX_BYTES
    kept = text.count("](memory-")
    assert f"{190 - kept} more memories are not listed" in text.splitlines()[-1]


single_line = st.text(min_size=1).filter(lambda s: _valid(check_description, s))
any_body = st.text(min_size=1).filter(lambda s: _valid(check_body, s))


def _valid(check, value: str) -> bool:  # type: ignore[no-untyped-def]
    try:
        check(value)
    except Exception:
        return False
    return True


@pytest.fixture(scope="module")
def two_stores(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[MemoryStore, MemoryStore, Path]]:
    folder = tmp_path_factory.mktemp("round-trip")
    with MemoryStore(folder / "first.db") as first, MemoryStore(folder / "second.db") as second:
        yield first, second, folder


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    description=single_line,
    body=any_body
    | st.lists(
        st.sampled_from(["---", "--- x", "name: y", "中文 行", "", "  indented", "a: b"]),
        min_size=1,
    )
    .map("\n".join)
    .filter(lambda s: _valid(check_body, s)),
)
def test_round_trip_export_import_export_is_byte_identical(
    two_stores: tuple[MemoryStore, MemoryStore, Path], description: str, body: str
) -> None:
    first, second, folder = two_stores
    case = folder / uuid.uuid4().hex
    with first.transaction() as tx:
        for memory in tx.memories():
            tx.delete(memory)
        tx.create("round-trip", "reference", description, body)
    export_memories(first, case / "one")
    import_memories(second, case / "one")
    export_memories(second, case / "two")
    imported = second.get("round-trip")
    assert imported.description == check_description(description)
    assert imported.body == check_body(body)
    for name in ("round-trip.md", "MEMORY.md"):
        assert (case / "one" / name).read_bytes() == (case / "two" / name).read_bytes()


@settings(max_examples=2000, deadline=None)
@given(
    value=st.text(min_size=1, max_size=40)
    | st.sampled_from(
        ["yes", "No", "~", "null", "1e3", "0x1F", "2026-01-01", "a: b", "a:b", "=", "<<"]
    )
)
def test_plain_frontmatter_reading_agrees_with_yaml(value: str) -> None:
    front = f"name: x\ndescription: {value}"
    fast = _read_plain_frontmatter(front)
    if fast is not None:
        assert fast == yaml.load(front, Loader=_TextLoader)
    for key in ("on", "yes", "null", "true", "1"):
        assert _read_plain_frontmatter(f"{key}: value") is None


def test_canonical_files_take_the_plain_path(store: MemoryStore) -> None:
    text = render_memory_file(store.create("plain", "user", "A plain description", "Body."))
    front = text.split("---")[1]
    assert _read_plain_frontmatter(front.strip("\n")) == {
        "name": "plain",
        "description": "A plain description",
        "type": "user",
    }
    assert parse_memory_text(text).metadata == {
        "name": "plain",
        "description": "A plain description",
        "type": "user",
    }


def test_alias_bomb_is_refused_quickly() -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    text = "---\nname: bomb\n" + "\n".join(levels) + "\n---\nbody\n"
    with pytest.raises(UnreadableFile, match="YAML aliases"):
        parse_memory_text(text)
