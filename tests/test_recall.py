"""Recall: the model path through the real anthropic client against a scripted local server,
every fallback, the keyword path, and the injected block."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import pytest
from anthropic import Anthropic

from memstore.agent.memory import AgentMemory
from memstore.llm.client import make_client
from memstore.llm.messages import recent_user_text
from memstore.recall.block import BLOCK_MAX_BYTES, memories_block
from memstore.recall.keyword import keyword_recall
from memstore.recall.selection import parse_indices
from memstore.recall.terms import number_phrases, recall_terms
from memstore.recall.turn import recall
from memstore.storage.models import MemoryRecord
from memstore.storage.store import MemoryStore
from tests.anthropic_server import AnthropicServer, error_reply, slow_reply, text_reply
from tests.conftest import MemctlRunner


@pytest.fixture
def filled(store: MemoryStore) -> MemoryStore:
    with store.transaction() as tx:
        tx.create(
            "user-python-style",
            "user",
            "User wants 4-space indentation, never tabs",
            "Use 4 spaces.",
        )
        tx.create(
            "project-deploy",
            "project",
            "Deployment goes through the release workflow",
            "Tag vX.Y.Z.",
        )
        tx.create("project-docker", "project", "Docker镜像在 CI 里构建", "本地不要推送镜像。")
    return store


def user(text: str) -> dict[str, object]:
    return {"role": "user", "content": text}


def test_model_path_sends_catalog_and_recent_text(
    filled: MemoryStore, client: Anthropic, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(text_reply("[1, 0]"))
    messages: list[dict[str, object]] = [
        user("first question"),
        {"role": "assistant", "content": "an answer"},
        {"role": "user", "content": [{"type": "text", "text": "how do we deploy?"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
    ]
    names = recall(messages, store=filled, client=client).names
    # The catalog is ordered by name: 0 project-deploy, 1 project-docker, 2 user-python-style.
    assert names == ["project-docker", "project-deploy"]
    (request,) = anthropic_server.requests
    prompt = request["messages"][0]["content"]
    assert "0: project-deploy — Deployment goes through the release workflow" in prompt
    assert "2: user-python-style — User wants 4-space indentation, never tabs" in prompt
    assert "first question\nhow do we deploy?" in prompt
    assert request["max_tokens"] <= 100
    sent = anthropic_server.headers[0]
    assert "test-key" in (sent.get("x-api-key", "") + sent.get("authorization", ""))


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("[2]", [2]),
        ("Sure! The relevant ones are [0, 2].", [0, 2]),
        ("```json\n[2, 1]\n```", [2, 1]),
        ("[]", []),
        ("[0, 0, 2, 2]", [0, 2]),
        ("[7, -1, 1]", [1]),
        ('[1, "2", 2.0, true, null]', [1]),
        ("[0, 1, 2, 0]", [0, 1, 2]),
    ],
)
def test_reply_parsing(reply: str, expected: list[int]) -> None:
    assert parse_indices(reply, 3, 5) == expected


def test_reply_parsing_caps_and_rejects() -> None:
    assert parse_indices("[0, 1, 2, 3, 4, 5, 6]", 10, 5) == [0, 1, 2, 3, 4]
    for hopeless in ("none of them", '{"indices": 1}', "[oops", ""):
        with pytest.raises(ValueError):
            parse_indices(hopeless, 3, 5)


@pytest.mark.parametrize(
    "failure",
    [
        text_reply("I think the deployment one."),
        error_reply(500, "api_error"),
        error_reply(529, "overloaded_error", "Overloaded"),
        error_reply(400, "invalid_request_error", "bad request"),
        error_reply(401, "authentication_error", "invalid x-api-key"),
        error_reply(429, "rate_limit_error", "slow down"),
    ],
)
def test_failures_fall_back_to_keywords_and_say_why(
    filled: MemoryStore,
    client: Anthropic,
    anthropic_server: AnthropicServer,
    failure: object,
    caplog: pytest.LogCaptureFixture,
) -> None:
    anthropic_server.script(failure)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="memstore.recall.turn"):
        result = recall([user("how does the deployment work?")], store=filled, client=client)
    assert result.path == "keyword"
    assert result.names == ["project-deploy"]
    assert result.reason
    assert "using keyword recall" in caplog.text
    assert len(anthropic_server.requests) == 1  # no retry storm before falling back


def test_timeout_falls_back(
    filled: MemoryStore,
    client: Anthropic,
    anthropic_server: AnthropicServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("memstore.recall.selection.SELECTION_TIMEOUT_S", 0.5)
    anthropic_server.script(slow_reply(3.0, "[0]"))
    result = recall([user("deploy")], store=filled, client=client)
    assert result.path == "keyword" and "did not answer within 0.5 s" in result.reason
    assert result.names == ["project-deploy"]


def test_connection_refused_falls_back(filled: MemoryStore) -> None:
    client = make_client(api_key="k", base_url="http://127.0.0.1:9")  # nothing listens there
    assert client is not None
    result = recall([user("deploy")], store=filled, client=client)
    assert result.path == "keyword" and "cannot reach" in result.reason
    assert result.names == ["project-deploy"]


def test_no_api_key_means_no_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    assert make_client() is None


def test_model_not_called_when_it_cannot_help(
    store: MemoryStore, client: Anthropic, anthropic_server: AnthropicServer
) -> None:
    assert recall([user("anything")], store=store, client=client).path == "none"  # empty store
    store.create("a-note", "user", "a note", "body")
    tool_only = [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}
    ]
    assert recall(tool_only, store=store, client=client).path == "none"
    assert anthropic_server.requests == []


def test_keyword_path_english_stemming_and_chinese(filled: MemoryStore) -> None:
    assert recall([user("deploying a release")], store=filled).names == ["project-deploy"]
    assert recall([user("镜像怎么构建？")], store=filled).names == ["project-docker"]
    assert recall([user("Docker镜像")], store=filled).names == ["project-docker"]
    assert recall([user("the and of to")], store=filled).names == []


def test_recent_text_takes_last_three_text_turns_capped() -> None:
    messages = [user(f"turn {i}") for i in range(5)]
    assert recent_user_text(messages) == "turn 2\nturn 3\nturn 4"
    assert len(recent_user_text([user("x" * 5000)])) == 2000


def record(name: str, body: str, age: timedelta) -> MemoryRecord:
    saved = (datetime.now(UTC) - age).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return MemoryRecord(1, name, "project", "a description", body, {}, 1, saved, saved)


def test_block_has_canonical_text_and_age() -> None:
    block = memories_block(
        [
            record("fresh", "new body", timedelta(hours=2)),
            record("old", "old body", timedelta(days=47)),
        ]
    )
    assert block.startswith("<relevant_memories>\n---\nname: fresh\n")
    assert block.endswith("</relevant_memories>")
    assert (
        "(saved 47 days ago — verify against the current code before relying on it)\n---\nname: old"
        in block
    )
    assert block.count("saved ") == 1


def test_block_caps_each_memory_and_the_whole() -> None:
    big = record("big", "x" * 10_000, timedelta(0))
    block = memories_block([big])
    assert "[cut: this memory is" in block and len(block.encode()) < 5_000
    many = [record(f"m{i}", "y" * 3_900, timedelta(0)) for i in range(8)]
    block = memories_block(many)
    assert len(block.encode()) <= BLOCK_MAX_BYTES + 200
    assert "more relevant memories left out" in block


def test_the_block_for_a_turn(filled: MemoryStore) -> None:
    memory = AgentMemory(filled, None, session_id="s", export_dir=None)
    block = memory.before_turn([user("how do we deploy?")]).block
    assert "name: project-deploy" in block and "Tag vX.Y.Z." in block
    assert memory.before_turn([user("nothing matches zzz")]).block == ""


def test_memctl_recall_offline_and_through_the_model(
    memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    memctl(
        "add",
        "project-deploy",
        "-t",
        "project",
        "-d",
        "Deploys use the release workflow",
        "-b",
        "Tag it.",
    )
    memctl("add", "user-tabs", "-t", "user", "-d", "Four spaces, never tabs", "-b", "Spaces.")
    offline = memctl("recall", "how do I deploy?", "--offline", "--json")
    assert offline.returncode == 0, offline.stderr
    result = json.loads(offline.stdout)
    assert result["path"] == "keyword"
    assert [m["name"] for m in result["memories"]] == ["project-deploy"]
    assert result["memories"][0]["score"] > 0
    assert result["memories"][0]["matched"] == ["deploy"]
    # The table says which words each memory has, and which word an equivalent stands for.
    table = memctl("recall", "我们怎么部署？", "--offline")
    assert table.stdout.splitlines()[0].split() == ["NAME", "SCORE", "MATCHED", "DESCRIPTION"]
    assert "deploy (for 部署)" in table.stdout.splitlines()[1]
    anthropic_server.script(text_reply("[1]"))
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": anthropic_server.url}
    online = memctl("recall", "indentation?", "--json", env=env)
    assert json.loads(online.stdout) == {
        "path": "model",
        "reason": "",
        "memories": [
            {
                "name": "user-tabs",
                "score": None,
                "matched": [],
                "similarity": None,
                "description": "Four spaces, never tabs",
            }
        ],
    }
    anthropic_server.script(error_reply(529, "overloaded_error", "Overloaded"))
    fallback = memctl("recall", "deploy", env=env)
    assert fallback.returncode == 0 and "Traceback" not in fallback.stderr
    assert "keyword recall (the model API answered 529: Overloaded)" in fallback.stderr
    assert "project-deploy" in fallback.stdout


def test_relevance_floor(store: MemoryStore) -> None:
    store.create("project-deploy", "project", "Deploys use the release workflow", "Tag it.")
    store.create("inkwell-msrv", "project", "Minimum supported Rust version is 1.74", "Check it.")
    # One word in common with a longer message, the others in no memory: nothing recalled.
    assert (
        recall([user("explain the difference between String and str in Rust")], store=store).names
        == []
    )
    # Nor a memory named for it (a name says what a memory is about; it was no evidence of
    # relevance that held on text the rule was not tuned on).
    assert recall([user("deploying a new build tonight")], store=store).names == []
    # Two words in common is enough, and one with a text of two.
    assert recall([user("which Rust version do we support?")], store=store).names == [
        "inkwell-msrv"
    ]
    assert recall([user("deploying tonight?")], store=store).names == ["project-deploy"]


def test_the_floor_looks_at_every_memory_shown(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    with store.transaction() as tx:
        tx.create("release-checklist", "project", "Release checklist", "Release, then release.")
        body = "Inkwell's CI runs " + "lint, " * 60 + "and the release job."
        tx.create("inkwell-ci", "project", "How inkwell is built", body)
        for i in range(8):
            tx.create(f"inkwell-note-{i}", "project", f"Inkwell note {i}", "About inkwell.")
    text = "releasing inkwell today, which procedure?"
    # The best shares one word (release), the second two (inkwell too): recalled.
    assert [h.memory.name for h in keyword_recall(store, text)][:2] == [
        "release-checklist",
        "inkwell-ci",
    ]
    monkeypatch.setattr("memstore.recall.keyword.FLOOR_CANDIDATES", 1)
    assert keyword_recall(store, text) == []


def test_memory_with_more_of_the_terms_outranks_one_repeating_a_term(store: MemoryStore) -> None:
    with store.transaction() as tx:
        tx.create("redis-notes", "project", "Redis, Redis, Redis", "Redis here, Redis there.")
        tx.create(
            "sessions", "project", "Where sessions are kept", "The session cache lives in Redis."
        )
        for topic in ("build", "lint", "docs", "release", "tests", "deploy", "fonts", "icons"):
            body = f"The {topic} cache is cleared nightly." if topic == "lint" else "About it."
            tx.create(f"note-{topic}", "project", f"Notes on {topic}", body)
    # bm25 alone puts the memory that says "redis" five times first; the coordination
    # factor prefers the one that has both words of the question.
    scores = store.rank_ids(recall_terms("redis cache"), 5)
    names = {i: memory.name for i, memory in store.by_ids(list(scores)).items()}
    bm25_order = [names[i] for i in sorted(scores, key=scores.__getitem__, reverse=True)]
    assert bm25_order == ["redis-notes", "sessions", "note-lint"]
    hits = keyword_recall(store, "redis cache", 5)
    assert [hit.memory.name for hit in hits] == ["sessions", "redis-notes", "note-lint"]
    assert hits[0].score > hits[1].score > hits[2].score > 0


def test_number_phrases() -> None:
    assert number_phrases("What did Maria share on 16 June, 2023?") == ['"16 june 2023"']
    assert number_phrases("upgrade to Python 3.12, then ship 1.4.0") == [
        '"python 3 12"',
        '"ship 1 4 0"',
    ]
    # "May" by a number is the month; a list of versions is a phrase per version.
    assert number_phrases("We met on 7 May 2023") == ['"7 may 2023"']
    assert number_phrases("Python 3.12, Go 1.22 and Node 20") == [
        '"python 3 12 go"',
        '"go 1 22"',
        '"node 20"',
    ]
    # A number alone, or among stopwords, is no phrase; Han text has none.
    assert number_phrases("is 42 the answer") == []
    assert number_phrases("新建一个 S3 bucket") == []


def test_a_number_with_its_words_finds_the_memory_of_that_date(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    with store.transaction() as tx:
        tx.create("maria-gym", "user", "Maria joined a gym", "Noted on 16 June, 2023.")
        tx.create(
            "maria-hires",
            "user",
            "Maria hired 16 people in June",
            "Maria's team grew by 16 in June. Noted on 30 June, 2023.",
        )
        for i in range(4):
            tx.create(f"other-{i}", "user", f"Another note {i}", "Noted on 1 May, 2023.")

    def names() -> list[str]:
        return [h.memory.name for h in keyword_recall(store, "What did Maria do on 16 June, 2023?")]

    assert names()[:2] == ["maria-gym", "maria-hires"]
    monkeypatch.setattr("memstore.recall.keyword.NUMBER_PHRASE_WEIGHT", 0)
    assert names()[:2] == ["maria-hires", "maria-gym"]


def test_floor_counts_a_word_and_its_inflections_once(store: MemoryStore) -> None:
    store.create("release-notes", "project", "Release notes live in CHANGES.md", "Deploy after.")
    # deploy and deploying are one term of the index: one term of three in common is below
    # the floor, in the name ("release", an equivalent of deploy) or not.
    assert keyword_recall(store, "deploy deploying tonight quickly") == []
    assert keyword_recall(store, "release tonight quickly") == []
    # Two of three is enough.
    assert [h.memory.name for h in keyword_recall(store, "deploying the changes tonight")] == [
        "release-notes"
    ]


def test_a_large_catalog_is_capped_with_the_related_memories_first(
    store: MemoryStore, client: Anthropic, anthropic_server: AnthropicServer
) -> None:
    with store.transaction() as tx:
        for i in range(250):
            tx.create(f"note-{i:03}", "project", f"Unrelated fact number {i}", "Nothing here.")
        tx.create("zz-kubernetes", "project", "Kubernetes manifests live in deploy/k8s", "x")
    anthropic_server.script(text_reply("[0]"))
    names = recall([user("where are the kubernetes manifests?")], store=store, client=client).names
    assert names == ["zz-kubernetes"]
    prompt = anthropic_server.requests[0]["messages"][0]["content"]
    catalog = prompt.split("Memories:\n")[1].splitlines()
    assert len(catalog) == 200 and catalog[0].startswith("0: zz-kubernetes")


def test_a_lone_chinese_stop_character_is_not_a_term(store: MemoryStore) -> None:
    terms = recall_terms("HTTP 的 ETag 是干什么用的")
    assert '"的"' not in terms and terms[:2] == ['"http"', '"etag"']
    store.create("project-notes", "project", "会议记录", "这是我们的 notes: 的 appears alone here")
    assert recall([user("ETag 的")], store=store).names == []


def test_a_long_text_searches_its_last_numbers_only() -> None:
    # A log line with no stopword is one run of words: each number is searched with its
    # neighbours, not the whole run, and only the last few.
    log = " ".join(f"step {i} took {i * 7} ms" for i in range(200))
    phrases = number_phrases(log)
    assert phrases[-2:] == ['"step 198 took 1386 ms"', '"step 199 took 1393 ms"']
    assert len(phrases) == 8
