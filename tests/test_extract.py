"""Extraction through the real anthropic client against the scripted local server: what the
model is shown, what is written, and what hostile answers cannot do."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memstore.files.exporter import export_memories
from memstore.learning.extract import (
    MAX_ITEMS_PER_TURN,
    extract_memories,
    extraction_window,
    render_transcript,
)
from memstore.llm.client import ModelClient
from memstore.storage.store import MemoryStore
from tests.anthropic_server import AnthropicServer, error_reply, text_reply
from tests.conftest import stored_text

# Every test with a store runs on SQLite and on PostgreSQL (tests/conftest.py).
pytestmark = pytest.mark.both_engines

PREFERENCE = {
    "name": "user-indentation",
    "type": "user",
    "description": "Always 4 spaces, never tabs",
    "body": "The user wants Python indented with 4 spaces and never tab characters.",
}


def turn(user_text: str, reply: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": user_text},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a.py"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x = 1\n" * 500}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": reply}]},
    ]


def live(store: MemoryStore) -> dict[str, tuple[str, str, str]]:
    return {m.name: (m.type, m.description, m.body) for m in store.memories()}


def test_a_stated_preference_becomes_a_user_memory(
    store: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(text_reply(json.dumps([PREFERENCE])))
    messages = turn("always use 4 spaces, never tabs", "FINAL-REPLY: noted, 4 spaces from now on.")
    result = extract_memories(messages, store=store, client=client, session_id="s-1")

    assert result.created == ["user-indentation"] and not result.dropped
    assert live(store)["user-indentation"][0] == "user"
    (request,) = anthropic_server.requests
    prompt = request["messages"][0]["content"]
    # The final assistant reply is part of what the model reads (the seed missed it) ...
    assert "FINAL-REPLY: noted" in prompt
    assert "always use 4 spaces, never tabs" in prompt
    # ... and tool traffic is summarised, not dumped.
    assert "[called read_file:" in prompt and "x = 1\nx = 1" not in prompt
    assert "the tool returned 3,000 characters" in prompt
    assert "secret" in request["system"].lower()
    # The event records the actor and the chat session.
    (event,) = store.history.events("user-indentation")
    assert event.actor == "extraction"
    run = store.history.run(event.run_id)
    assert run is not None and run.session_id == "s-1"


def test_a_changed_preference_updates_the_memory_instead_of_adding_a_twin(
    store: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    store.create(**PREFERENCE)
    changed = {**PREFERENCE, "description": "Always 2 spaces, never tabs", "body": "2 spaces."}
    anthropic_server.script(text_reply(f"Here you go:\n```json\n{json.dumps([changed])}\n```"))
    result = extract_memories(
        turn("actually, use 2 spaces from now on", "OK, 2 spaces."), store=store, client=client
    )
    assert result.updated == ["user-indentation"] and result.created == []
    assert live(store) == {"user-indentation": ("user", "Always 2 spaces, never tabs", "2 spaces.")}
    prompt = anthropic_server.requests[0]["messages"][0]["content"]
    # The model saw the whole memory it updated.
    assert (
        "### user-indentation (user)\nAlways 4 spaces, never tabs\n" + PREFERENCE["body"] in prompt
    )
    assert [e.operation for e in store.history.events("user-indentation")] == ["create", "update"]


SECRET_TEXTS = [
    "sk-ant-api03-" + "A1b2C3d4E5" * 8,
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_" + "a1B2c3D4e5" * 4,
    "xoxb-123456789012-abcdefghijkl",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----",
    "postgres://admin:hunter2secret@db.internal:5432/app",
]


@pytest.mark.parametrize("secret", SECRET_TEXTS)
def test_secrets_in_the_conversation_are_never_stored(
    store: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer, secret: str
) -> None:
    # The model (wrongly) keeps the secret; the deterministic check refuses it, and keeps
    # the rest of the answer.
    leaky = {**PREFERENCE, "name": "project-credentials", "type": "project", "body": secret}
    anthropic_server.script(text_reply(json.dumps([leaky, PREFERENCE])))
    result = extract_memories(
        turn(f"here is the key: {secret}", "Thanks, configured."), store=store, client=client
    )
    assert result.created == ["user-indentation"]
    assert len(result.dropped) == 1 and "secret" in result.dropped[0]
    dump = stored_text(store)
    assert "user-indentation" in dump and secret.splitlines()[0] not in dump


def test_placeholder_passwords_and_ordinary_text_are_not_secrets(
    store: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    harmless = {
        **PREFERENCE,
        "name": "project-database-url",
        "type": "project",
        "body": "Connect with postgres://app:${DB_PASSWORD}@db:5432/app; the key lives in .env "
        "(ANTHROPIC_API_KEY). Task sk-learn is unrelated.",
    }
    anthropic_server.script(text_reply(json.dumps([harmless])))
    result = extract_memories(turn("where is the db?", "In .env."), store=store, client=client)
    assert result.created == ["project-database-url"], result.dropped


HOSTILE_ITEMS: list[Any] = [
    {**PREFERENCE, "name": "../../etc/passwd"},
    {**PREFERENCE, "name": "CON"},
    {**PREFERENCE, "name": "x" * 300},
    {**PREFERENCE, "name": "huge", "body": "y" * 10_000_000},
    {**PREFERENCE, "name": "odd-type", "type": "secret-plans"},
    {**PREFERENCE, "name": "twin", "body": "first"},
    {**PREFERENCE, "name": "twin", "body": "second"},
    {**PREFERENCE, "name": "no-body", "body": "  "},
    {**PREFERENCE, "name": "multi-line", "description": "one\ntwo"},
    {"name": "not-strings", "type": "user", "description": 1, "body": ["a"]},
    "just a string",
    42,
]


def test_hostile_answers_leave_the_store_valid_and_write_nothing_outside_memory(
    tmp_path: Path, store: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    anthropic_server.script(text_reply(json.dumps(HOSTILE_ITEMS)))
    result = extract_memories(
        turn("hi", "hello"), store=store, client=client, max_items=len(HOSTILE_ITEMS)
    )
    names = set(live(store))
    # Names are made safe, never trusted as paths; the rest are dropped with a reason.
    assert names == {"etc-passwd", "con-memory", "x" * 64, "twin"}
    assert live(store)["twin"][2] == "first"
    assert len(result.dropped) == len(HOSTILE_ITEMS) - len(names)
    reasons = "\n".join(result.dropped)
    for expected in ["4,096 bytes", "secret-plans", "a second item named 'twin'", "single line"]:
        assert expected in reasons
    before = {p for p in tmp_path.rglob("*")}
    export_memories(store, tmp_path / ".memory", personal=True)  # all, on a server too
    written = {p for p in tmp_path.rglob("*")} - before
    assert all(p.is_relative_to(tmp_path / ".memory") for p in written)
    assert {p.name for p in written if p.suffix == ".md"} == {f"{n}.md" for n in names} | {
        "MEMORY.md"
    }
    if store.path is not None:
        assert sqlite3.connect(store.path).execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert store.history.verify().events == len(store.history.events())


def test_items_per_turn_are_capped(
    store: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    items = [{**PREFERENCE, "name": f"note-{i}"} for i in range(MAX_ITEMS_PER_TURN + 3)]
    anthropic_server.script(text_reply(json.dumps(items)))
    result = extract_memories(turn("hi", "hello"), store=store, client=client)
    assert len(result.created) == MAX_ITEMS_PER_TURN
    assert len(result.dropped) == 3 and "more than" in result.dropped[0]


@pytest.mark.parametrize(
    "reply",
    [
        text_reply("[]"),
        text_reply("Nothing worth remembering here."),
        text_reply('{"name": "an object, not an array"}'),
        error_reply(529, "overloaded_error"),
        error_reply(400, "invalid_request_error"),
    ],
)
def test_empty_unparseable_or_failed_answers_write_nothing(
    store: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer, reply: Any
) -> None:
    store.create(**PREFERENCE)
    anthropic_server.script(reply)
    result = extract_memories(turn("hi", "hello"), store=store, client=client)
    assert not result.changed and result.run_id is None
    assert len(store.history.events()) == 1
    if reply.status != 200 or "[]" not in json.dumps(reply.body):
        assert result.failure


def test_no_client_asks_nothing(store: MemoryStore) -> None:
    result = extract_memories(turn("hi", "hello"), store=store, client=None)
    assert result.failure == "no model client" and not result.changed


def test_the_transcript_keeps_the_end_of_a_long_turn() -> None:
    messages = [{"role": "user", "content": f"message {i} " + "z" * 5000} for i in range(10)]
    messages.append({"role": "assistant", "content": "the final reply"})
    transcript = render_transcript(messages)
    assert transcript.endswith("assistant: the final reply")
    assert "characters left out" in transcript
    assert len(transcript) <= 24_000


def test_earlier_turns_are_marked_as_context() -> None:
    messages = [
        {"role": "user", "content": "use tabs"},
        {"role": "assistant", "content": "OK, tabs."},
        *turn("now write the parser", "Done."),
    ]
    transcript = render_transcript(messages)
    earlier, current = transcript.split("[This turn: what to learn from]")
    assert earlier.startswith("[Earlier in the conversation") and "use tabs" in earlier
    assert "now write the parser" in current and "use tabs" not in current


def test_a_memory_not_shown_in_full_is_never_overwritten(
    store: MemoryStore,
    client: ModelClient,
    anthropic_server: AnthropicServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("memstore.learning.extract.FULL_TEXT_RELATED", 1)
    monkeypatch.setattr("memstore.learning.extract.FULL_TEXT_SMALL_STORE", 1)
    store.create("project-deploy", "project", "Deploys go through CI", "The whole runbook …")
    store.create("user-indentation", "user", "4 spaces", "Never tabs.")
    clash = {"name": "project-deploy", "type": "user", "description": "New", "body": "Short."}
    anthropic_server.script(text_reply(json.dumps([clash])))
    result = extract_memories(turn("indentation please", "ok"), store=store, client=client)
    prompt = anthropic_server.requests[0]["messages"][0]["content"]
    assert "Other existing memories (do not reuse these names):\n- project-deploy" in prompt
    assert result.created == ["project-deploy-2"] and result.updated == []
    assert store.get("project-deploy").body == "The whole runbook …"


def test_an_update_keeps_the_memory_type(
    store: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    store.create(**PREFERENCE)
    retyped = {**PREFERENCE, "type": "project", "body": "Still 4 spaces."}
    anthropic_server.script(text_reply(json.dumps([retyped])))
    extract_memories(turn("spaces", "ok"), store=store, client=client)
    assert live(store)["user-indentation"][0] == "user"


def test_the_turns_request_is_kept_when_many_tool_calls_follow_it() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "from now on, never use tabs"}]
    for _ in range(8):
        messages += turn("x", "y")[1:3]
    messages.append({"role": "assistant", "content": "done"})
    window = extraction_window(messages)
    assert window[0] is messages[0] and len(window) == 11
    assert "never use tabs" in render_transcript(window).split("[This turn")[1]


def test_a_secret_used_as_a_name_is_not_logged(
    store: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    key = "sk-ant-api03-" + "Z9y8X7w6V5" * 8
    anthropic_server.script(text_reply(json.dumps([{**PREFERENCE, "name": key, "body": key}])))
    result = extract_memories(turn("hi", "hello"), store=store, client=client)
    assert len(result.dropped) == 1 and key not in result.dropped[0]


def test_a_memory_changed_while_the_model_answers_is_not_overwritten(
    store: MemoryStore, client: ModelClient, anthropic_server: AnthropicServer
) -> None:
    import threading

    from tests.anthropic_server import slow_reply

    store.create(**PREFERENCE)
    stale = {**PREFERENCE, "body": "Written from the old version."}
    anthropic_server.script(slow_reply(1.0, json.dumps([stale])))

    def edit_meanwhile() -> None:
        with MemoryStore(store.url or store.path or "") as other:
            other.update("user-indentation", body="Edited by the user meanwhile.")

    editor = threading.Timer(0.3, edit_meanwhile)
    editor.start()
    result = extract_memories(turn("spaces", "ok"), store=store, client=client)
    editor.join()
    assert store.get("user-indentation").body == "Edited by the user meanwhile."
    assert result.created == ["user-indentation-2"] and result.updated == []
