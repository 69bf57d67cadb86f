"""MemoryStore.search: kept in sync with every write, ranked by bm25, safe for any input."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore.errors import InvalidMemory
from memstore.storage.store import MemoryStore


@pytest.fixture
def filled(store: MemoryStore) -> MemoryStore:
    with store.transaction() as tx:
        tx.create("deploy-process", "project", "How we deploy to production", "Run make deploy.")
        tx.create(
            "tabs",
            "user",
            "Indentation preference",
            "Four spaces, never tabs. Deploy nothing on Fridays.",
        )
        tx.create(
            "docker-images",
            "project",
            "Docker镜像 的 构建",
            "镜像 在 CI 里 构建, pushed to the registry",
        )
    return store


def names(store: MemoryStore, query: str, limit: int = 10) -> list[str]:
    return [hit.memory.name for hit in store.search(query, limit)]


def test_ranking_prefers_name_and_description(filled: MemoryStore) -> None:
    assert names(filled, "deploy") == ["deploy-process", "tabs"]


def test_stemming_and_prefix(filled: MemoryStore) -> None:
    assert "deploy-process" in names(filled, "deploying")
    assert names(filled, "indent*") == ["tabs"]


def test_all_words_first_then_any(filled: MemoryStore) -> None:
    assert names(filled, "deploy fridays") == ["tabs"]
    assert set(names(filled, "registry fridays")) == {"docker-images", "tabs"}


def test_limit(filled: MemoryStore) -> None:
    assert len(filled.search("deploy", limit=1)) == 1


def test_index_follows_updates_and_deletes(filled: MemoryStore) -> None:
    filled.update("tabs", body="Four spaces only.")
    assert names(filled, "fridays") == []
    filled.delete("deploy-process")
    assert names(filled, "production") == []
    filled.restore("deploy-process")
    assert names(filled, "production") == ["deploy-process"]


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '"unbalanced',
        "*",
        "-",
        "deploy -fridays",
        "name:deploy",
        "(deploy",
        "deploy)",
        "AND",
        "deploy AND NOT tabs",
        "NEAR(deploy tabs)",
        "deploy OR",
        "🎉🔥",
        "部署",
        "C盘",
        "Docker镜像",
        "^deploy",
        "{name}: deploy",
        "'; DROP TABLE memory; --",
        "\x00",
        "",
        "   ",
    ],
)
def test_any_text_is_a_safe_query(filled: MemoryStore, query: str) -> None:
    filled.search(query)  # must not raise
    assert len(filled.memories()) == 3


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=st.text())
def test_arbitrary_text_never_raises(filled: MemoryStore, query: str) -> None:
    filled.search(query)


def test_mixed_script_word_is_found(filled: MemoryStore) -> None:
    assert names(filled, "Docker镜像") == ["docker-images"]


def test_index_tokens_are_the_tokens_of_the_index(store: MemoryStore) -> None:
    from memstore.recall.tokens import TOKENIZE, index_tokens

    text = "Deploying the café's snake_case migrations 1.4.0, then 部署流程 again"
    store.create("tokens", "project", "a description", text)
    with store.engine.connect() as connection:
        schema = connection.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE name = 'memory_fts'"
        ).scalar_one()
        connection.exec_driver_sql(
            "CREATE VIRTUAL TABLE temp.tokens USING fts5vocab(main, memory_fts, instance)"
        )
        indexed = {
            term
            for (term,) in connection.exec_driver_sql(
                "SELECT term FROM temp.tokens WHERE col = 'body'"
            )
        }
    assert TOKENIZE in schema  # the same tokenizer as the index
    assert index_tokens(text) == indexed
    assert {"deploi", "cafe", "snake", "case", "部署", "署流", "流程"} <= indexed


def test_word_tokens_survive_the_cache_being_cleared(monkeypatch: pytest.MonkeyPatch) -> None:
    import memstore.recall.tokens as tokens

    text = "how do we deploy to staging quickly"
    expected = tokens.token_sequence(text)
    assert len(expected) == 7
    # A cache that fills up is cleared before the unseen words are added: the words seen
    # before must not come back empty.
    monkeypatch.setattr(tokens, "STEM_CACHE_MAX", 8)
    tokens.token_sequence("alpha beta gamma delta epsilon")
    assert tokens.token_sequence(text + " zeta") == [*expected, "zeta"]
    assert tokens.index_tokens(text + " eta") == frozenset([*expected, "eta"])


def test_a_search_of_one_type_filters_before_the_limit(filled: MemoryStore) -> None:
    # "tabs" ranks below the project memory for "deploy"; a limit of 1 still finds it.
    assert [h.memory.name for h in filled.search("deploy", 1, type="user")] == ["tabs"]
    assert [h.memory.name for h in filled.search("deploy", 5, type="project")] == ["deploy-process"]
    assert filled.search("deploy", 5, type="reference") == []
    with pytest.raises(InvalidMemory):
        filled.search("deploy", 5, type="secret")
