"""memstore.integrations.memory_tool: the Anthropic memory tool backed by memstore, driven by
the SDK's own tool runner against the scripted loopback server. Each change is one run of
memory_tool; every refusal reaches the model as an error and changes nothing."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstore.files.format import render_memory_file
from memstore.integrations.memory_tool import (
    DEFAULT_TYPE,
    FILE_MAX_BYTES,
    MemstoreAsyncMemoryTool,
    MemstoreMemoryTool,
    memory_name,
)
from memstore.llm.client import ModelClient
from memstore.settings import Settings
from tests.anthropic_server import AnthropicServer, text_reply, tool_reply
from tests.conftest import ROOT, MemctlRunner

BETA = "context-management-2025-06-27"
SECRET = "AKIA" + "Q7RZ4XW2M9KD3PLE"


@pytest.fixture
def tool(tmp_path: Path) -> Iterator[MemstoreMemoryTool]:
    with MemstoreMemoryTool.open(start=tmp_path, settings=Settings.from_environment({})) as opened:
        yield opened


def _converse(
    client: ModelClient,
    server: AnthropicServer,
    tool: MemstoreMemoryTool,
    *calls: dict[str, Any],
) -> list[dict[str, Any]]:
    """The model makes `calls` (one per reply), then answers; the tool_results the server
    received for them, in order."""
    before = len(server.requests)
    server.script(*[tool_reply(("memory", call)) for call in calls], text_reply("Done."))
    runner = client.sdk.beta.messages.tool_runner(
        model="scripted",
        max_tokens=1024,
        tools=[tool],
        betas=[BETA],
        messages=[{"role": "user", "content": "Keep what you learn in your memory."}],
    )
    final = runner.until_done()
    assert final.content[-1].type == "text"
    requests = server.requests[before:]
    assert len(requests) == len(calls) + 1
    results = []
    for request in requests[1:]:
        (block,) = request["messages"][-1]["content"]
        assert block["type"] == "tool_result"
        results.append(block)
    return results


def _one(
    client: ModelClient, server: AnthropicServer, tool: MemstoreMemoryTool, **call: Any
) -> dict[str, Any]:
    (result,) = _converse(client, server, tool, call)
    return result


def _runs(tool: MemstoreMemoryTool) -> list[tuple[str, str]]:
    return [(run["actor"], run["command"]) for run in tool.door.store.history.runs()]


def _memory_files(tool: MemstoreMemoryTool) -> dict[str, bytes]:
    folder = tool.door.workspace.memory_folder
    return {path.name: path.read_bytes() for path in sorted(folder.glob("*.md"))}


def test_the_runner_offers_the_memory_tool(
    client: ModelClient, anthropic_server: AnthropicServer, tool: MemstoreMemoryTool
) -> None:
    result = _one(client, anthropic_server, tool, command="view", path="/memories")
    request = anthropic_server.requests[0]
    assert request["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    assert BETA in anthropic_server.headers[0]["anthropic-beta"]
    assert "is_error" not in result
    assert result["content"] == (
        "Here're the files and directories up to 2 levels deep in /memories, excluding "
        "hidden items:\n0B\t/memories"
    )


def test_a_scripted_model_creates_edits_renames_and_deletes_a_memory(
    client: ModelClient,
    anthropic_server: AnthropicServer,
    tool: MemstoreMemoryTool,
    memctl: MemctlRunner,
    tmp_path: Path,
) -> None:
    path = "/memories/user-indentation.md"
    results = _converse(
        client,
        anthropic_server,
        tool,
        {"command": "create", "path": path, "file_text": "# Indentation\nUses tabs.\n"},
        {"command": "str_replace", "path": path, "old_str": "Uses tabs.", "new_str": "Tabs, 4."},
        {"command": "insert", "path": path, "insert_line": 7, "insert_text": "Go and Make."},
        {"command": "view", "path": path},
        {"command": "rename", "old_path": path, "new_path": "/memories/user-tabs.md"},
        {"command": "view", "path": "/memories"},
        {"command": "delete", "path": "/memories/user-tabs.md"},
    )
    assert not any(result.get("is_error") for result in results), results
    created, replaced, inserted, viewed, renamed, listed, deleted = (
        result["content"] for result in results
    )
    assert created == (
        f"File created successfully at: {path}. It is stored with a frontmatter (name, "
        "description, type) above the text, which starts at line 7."
    )
    assert replaced == (
        "The memory file has been edited. Here is the snippet showing the change (with line "
        "numbers):\n     6\t\n     7\t# Indentation\n     8\tTabs, 4."
    )
    assert inserted == f"The file {path} has been edited."
    assert viewed == (
        f"Here's the content of {path} with line numbers:\n"
        "     1\t---\n     2\tname: user-indentation\n     3\tdescription: Indentation\n"
        "     4\ttype: user\n     5\t---\n     6\t\n     7\t# Indentation\n"
        "     8\tGo and Make.\n     9\tTabs, 4."
    )
    assert renamed == f"Successfully renamed {path} to /memories/user-tabs.md"
    assert deleted == "Successfully deleted /memories/user-tabs.md"

    assert _runs(tool) == [
        ("memory_tool", f"memory_tool create {path}"),
        ("memory_tool", f"memory_tool str_replace {path}"),
        ("memory_tool", f"memory_tool insert {path} at line 7"),
        ("memory_tool", f"memory_tool rename {path} /memories/user-tabs.md"),
        ("memory_tool", "memory_tool delete /memories/user-tabs.md"),
    ]
    events = tool.door.store.history.events()
    assert [(e.operation, e.memory_name, e.actor) for e in events] == [
        ("create", "user-indentation", "memory_tool"),
        ("update", "user-indentation", "memory_tool"),
        ("update", "user-indentation", "memory_tool"),
        ("update", "user-tabs", "memory_tool"),
        ("delete", "user-tabs", "memory_tool"),
    ]
    assert tool.door.store.summaries() == []
    assert not (tmp_path / ".memory" / "user-tabs.md").exists()

    # A delete is soft: memctl brings the memory back, as the model last left it.
    restored = memctl("restore", "user-tabs")
    assert restored.returncode == 0, restored.stderr
    memory = tool.door.store.get("user-tabs")
    assert (memory.type, memory.description) == ("user", "Indentation")
    assert memory.body == "# Indentation\nGo and Make.\nTabs, 4."
    size = len(render_memory_file(memory).encode())
    assert listed.endswith(f"\n{size}B\t/memories\n{size}B\t/memories/user-tabs.md")


def test_a_created_file_without_frontmatter_takes_defaults(
    client: ModelClient, anthropic_server: AnthropicServer, tool: MemstoreMemoryTool
) -> None:
    text = "The deploy runs from the release branch.\nStaging first, then production.\n"
    _one(
        client, anthropic_server, tool, command="create", path="/memories/deploy.md", file_text=text
    )
    memory = tool.door.store.get("deploy")
    assert memory.type == DEFAULT_TYPE
    assert memory.description == "The deploy runs from the release branch."
    assert memory.body == text.strip()


def test_a_created_file_with_frontmatter_is_read_as_the_importer_reads_it(
    client: ModelClient, anthropic_server: AnthropicServer, tool: MemstoreMemoryTool
) -> None:
    text = (
        "---\ndescription: Run the integration tests before a push\ntype: feedback\n"
        "owner: platform\n---\nAlways run `make integration` before pushing.\n"
    )
    result = _one(
        client, anthropic_server, tool, command="create", path="/memories/tests.md", file_text=text
    )
    assert "is_error" not in result
    memory = tool.door.store.get("tests")
    assert (memory.type, memory.description) == (
        "feedback",
        "Run the integration tests before a push",
    )
    assert memory.extra == {"owner": "platform"}
    assert (
        (tool.door.workspace.memory_folder / "tests.md")
        .read_text()
        .startswith("---\nname: tests\n")
    )


def test_a_view_lists_the_store_and_shows_a_range_of_lines(
    client: ModelClient, anthropic_server: AnthropicServer, tool: MemstoreMemoryTool
) -> None:
    with tool.door.change("seed") as tx:
        tx.create("project-database", "project", "Postgres 16", "The database is Postgres 16.")
        tx.create("user-language", "user", "Writes Python", "Prefers Python 3.12.")
    listing, lines = (
        result["content"]
        for result in _converse(
            client,
            anthropic_server,
            tool,
            {"command": "view", "path": "/memories/"},
            {"command": "view", "path": "/memories/user-language.md", "view_range": [6, -1]},
        )
    )
    sizes = {
        name: len((tool.door.workspace.memory_folder / f"{name}.md").read_bytes())
        for name in ("project-database", "user-language")
    }
    assert listing.splitlines()[1:] == [
        f"{sum(sizes.values())}B\t/memories",
        f"{sizes['project-database']}B\t/memories/project-database.md",
        f"{sizes['user-language']}B\t/memories/user-language.md",
    ]
    assert lines == (
        "Here's the content of /memories/user-language.md with line numbers:\n"
        "     6\t\n     7\tPrefers Python 3.12."
    )


# (call, what the error says): none of them may change anything.
HOSTILE = [
    ({"command": "view", "path": "/etc/passwd"}, "Path must start with /memories"),
    ({"command": "view", "path": "/memories/../../etc/passwd"}, "would escape /memories"),
    ({"command": "create", "path": "/memories/../x.md", "file_text": "x"}, "would escape"),
    ({"command": "create", "path": "/memories/%2e%2e/x.md", "file_text": "x"}, "would escape"),
    ({"command": "create", "path": "/memories/..%2fx.md", "file_text": "x"}, "would escape"),
    ({"command": "create", "path": "/memories\\..\\x.md", "file_text": "x"}, "would escape"),
    ({"command": "create", "path": "/memoriesx/a.md", "file_text": "x"}, "must start with"),
    ({"command": "create", "path": "memories/a.md", "file_text": "x"}, "must start with"),
    ({"command": "create", "path": "/memories/a/b.md", "file_text": "x"}, "not supported"),
    ({"command": "create", "path": "/memories/Bad_Name.md", "file_text": "x"}, "kebab-case"),
    ({"command": "create", "path": "/memories/con.md", "file_text": "x"}, "reserved"),
    ({"command": "create", "path": "/memories/notes.txt", "file_text": "x"}, "Markdown"),
    ({"command": "create", "path": "/memories", "file_text": "x"}, "is a directory"),
    (
        {"command": "create", "path": "/memories/huge.md", "file_text": "x" * 2_000_000},
        f"at most {FILE_MAX_BYTES:,} bytes",
    ),
    (
        {"command": "create", "path": "/memories/aws.md", "file_text": f"Key: {SECRET}\n"},
        "secrets are not saved",
    ),
    ({"command": "create", "path": "/memories/tabs.md", "file_text": "x"}, "already exists"),
    (
        {"command": "create", "path": "/memories/x.md", "file_text": "---\nname: y\n---\nz"},
        "the path names it",
    ),
    ({"command": "create", "path": "/memories/x.md", "file_text": "---\ntype: user\n"}, "closing"),
    ({"command": "create", "path": "/memories/x.md"}, "`file_text` must be text"),
    (
        {"command": "create", "path": "/memories/x.md", "file_text": "a \ud800 b"},
        "not valid Unicode",
    ),
    ({"command": "view", "path": "/memories/\udcff.md"}, "not valid Unicode"),
    (
        {"command": "str_replace", "path": "/memories/tabs.md", "old_str": "no", "new_str": "a"},
        "did not appear verbatim",
    ),
    (
        {"command": "str_replace", "path": "/memories/tabs.md", "old_str": "tabs", "new_str": "a"},
        "Multiple occurrences of old_str `tabs` in lines: 2, 3",
    ),
    (
        {
            "command": "str_replace",
            "path": "/memories/tabs.md",
            "old_str": "Indent with tabs.",
            "new_str": f"Indent with tabs. {SECRET}",
        },
        "secrets are not saved",
    ),
    (
        {
            "command": "str_replace",
            "path": "/memories/tabs.md",
            "old_str": "type: user",
            "new_str": "type: wish",
        },
        "must be one of",
    ),
    (
        {
            "command": "str_replace",
            "path": "/memories/tabs.md",
            "old_str": "name: tabs",
            "new_str": "name: spaces",
        },
        "use the rename command",
    ),
    (
        {
            "command": "str_replace",
            "path": "/memories/tabs.md",
            "old_str": "Indent with tabs.",
            "new_str": "y" * (FILE_MAX_BYTES - 50),
        },
        "at most",
    ),
    (
        {"command": "str_replace", "path": "/memories/nope.md", "old_str": "a", "new_str": "b"},
        "does not exist",
    ),
    (
        {"command": "insert", "path": "/memories/tabs.md", "insert_line": 0, "insert_text": "x"},
        "would not be a memory file",
    ),
    (
        {"command": "insert", "path": "/memories/tabs.md", "insert_line": 99, "insert_text": "x"},
        "should be within the range [0, 8]",
    ),
    (
        {
            "command": "insert",
            "path": "/memories/tabs.md",
            "insert_line": "first",
            "insert_text": "x",
        },
        "insert_line",
    ),
    ({"command": "view", "path": "/memories/tabs.md", "view_range": [9, 10]}, "view_range"),
    ({"command": "view", "path": "/memories/tabs.md", "view_range": "all"}, "view_range"),
    ({"command": "view", "path": "/memories/nope.md"}, "does not exist"),
    ({"command": "view", "path": f"/memories/{'a' * 100_000}.md"}, "at most 64 characters"),
    ({"command": "view", "path": "/memories/" + "../" * 50_000}, "would escape"),
    ({"command": "delete", "path": "/memories"}, "Cannot delete the /memories directory"),
    ({"command": "delete", "path": "/memories/nope.md"}, "does not exist"),
    ({"command": "delete", "path": "/memories/../tabs.md"}, "would escape"),
    (
        {"command": "rename", "old_path": "/memories/tabs.md", "new_path": "/memories/spaces.md"},
        "already exists",
    ),
    (
        {"command": "rename", "old_path": "/memories/tabs.md", "new_path": "/tmp/tabs.md"},
        "must start with",
    ),
    (
        {"command": "rename", "old_path": "/memories", "new_path": "/memories/all.md"},
        "Cannot rename the /memories directory",
    ),
]


@pytest.mark.parametrize(("call", "says"), HOSTILE, ids=[str(i) for i in range(len(HOSTILE))])
def test_a_hostile_call_is_an_error_to_the_model_and_changes_nothing(
    client: ModelClient,
    anthropic_server: AnthropicServer,
    tool: MemstoreMemoryTool,
    call: dict[str, Any],
    says: str,
) -> None:
    with tool.door.change("seed") as tx:
        tx.create("tabs", "user", "Indents with tabs", "Indent with tabs.\nGo uses tabs too.")
        tx.create("spaces", "user", "YAML uses spaces", "YAML files indent with spaces.")
    store, runs, files = tool.door.store.memories(), _runs(tool), _memory_files(tool)

    result = _one(client, anthropic_server, tool, **call)

    assert result["is_error"] is True
    assert says in result["content"]
    assert SECRET not in result["content"]
    assert len(result["content"]) < 500
    assert tool.door.store.memories() == store
    assert _runs(tool) == runs
    assert _memory_files(tool) == files


@pytest.mark.parametrize(
    "path",
    ["/memories/.md", "/memories//x.md", "/memories/./x.md", "/memories/x.md\x00.md", "/"],
)
def test_paths_that_name_no_memory_are_refused(path: str) -> None:
    from anthropic.lib.tools import ToolError

    with pytest.raises(ToolError):
        memory_name(path)


def test_the_streaming_runner_runs_the_tool_too(
    client: ModelClient, anthropic_server: AnthropicServer, tool: MemstoreMemoryTool
) -> None:
    call = {"command": "create", "path": "/memories/tabs.md", "file_text": "Indent with tabs."}
    anthropic_server.script(tool_reply(("memory", call)), text_reply("Saved."))
    runner = client.sdk.beta.messages.tool_runner(
        model="scripted",
        max_tokens=1024,
        tools=[tool],
        betas=[BETA],
        stream=True,
        messages=[{"role": "user", "content": "I indent with tabs."}],
    )
    assert runner.until_done().content[-1].type == "text"
    assert anthropic_server.requests[0]["stream"] is True
    (result,) = anthropic_server.requests[1]["messages"][-1]["content"]
    assert result["content"].startswith("File created successfully at: /memories/tabs.md.")
    assert tool.door.store.get("tabs").body == "Indent with tabs."


def test_the_async_tool_runs_in_the_async_runner(
    anthropic_server: AnthropicServer, tmp_path: Path
) -> None:
    from anthropic import AsyncAnthropic

    calls = [
        {"command": "create", "path": "/memories/tabs.md", "file_text": "Indent with tabs."},
        {"command": "create", "path": "/memories/../tabs.md", "file_text": "x"},
        {"command": "rename", "old_path": "/memories/tabs.md", "new_path": "/memories/indent.md"},
    ]
    anthropic_server.script(*[tool_reply(("memory", c)) for c in calls], text_reply("Done."))

    async def converse() -> None:
        client = AsyncAnthropic(api_key="test-key", base_url=anthropic_server.url)
        settings = Settings.from_environment({})
        async with MemstoreAsyncMemoryTool.open(start=tmp_path, settings=settings) as memory:
            runner = client.beta.messages.tool_runner(
                model="scripted",
                max_tokens=1024,
                tools=[memory],
                betas=[BETA],
                messages=[{"role": "user", "content": "I indent with tabs."}],
            )
            await runner.until_done()
        await client.close()

    asyncio.run(converse())
    created, escaped, renamed = (
        request["messages"][-1]["content"][0] for request in anthropic_server.requests[1:]
    )
    assert created["content"].startswith("File created successfully at: /memories/tabs.md.")
    assert escaped["is_error"] is True and "would escape" in escaped["content"]
    assert renamed["content"] == "Successfully renamed /memories/tabs.md to /memories/indent.md"
    with MemstoreMemoryTool.open(start=tmp_path, settings=Settings.from_environment({})) as tool:
        assert [m.name for m in tool.door.store.memories()] == ["indent"]
        assert _runs(tool) == [
            ("memory_tool", "memory_tool create /memories/tabs.md"),
            ("memory_tool", "memory_tool rename /memories/tabs.md /memories/indent.md"),
        ]


def test_the_documented_example_runs_against_the_loopback_server(
    anthropic_server: AnthropicServer, tmp_path: Path
) -> None:
    anthropic_server.script(
        tool_reply(
            (
                "memory",
                {
                    "command": "create",
                    "path": "/memories/user-indentation.md",
                    "file_text": "Indents with tabs.",
                },
            )
        ),
        text_reply("I will remember that you indent with tabs."),
    )
    environment = {
        **os.environ,
        "ANTHROPIC_BASE_URL": anthropic_server.url,
        "ANTHROPIC_API_KEY": "test-key",
    }
    environment.pop("MEMSTORE_DB", None)
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "memory_tool_app.py")],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "I will remember that you indent with tabs."
    assert BETA in anthropic_server.headers[0]["anthropic-beta"]
    assert "is_error" not in anthropic_server.requests[1]["messages"][-1]["content"][0]
    with MemstoreMemoryTool.open(start=tmp_path, settings=Settings.from_environment({})) as tool:
        assert tool.door.store.get("user-indentation").body == "Indents with tabs."
        assert _runs(tool) == [("memory_tool", "memory_tool create /memories/user-indentation.md")]
    # Without a key: one line, no traceback.
    keyless = {k: v for k, v in environment.items() if not k.startswith("ANTHROPIC_")}
    no_key = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "memory_tool_app.py")],
        cwd=tmp_path, env=keyless, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert no_key.returncode == 1 and no_key.stderr == "set ANTHROPIC_API_KEY to run this example\n"


def test_reading_an_empty_workspace_creates_nothing(
    client: ModelClient, anthropic_server: AnthropicServer, tmp_path: Path
) -> None:
    """A view, or a command refused, leaves no .memory/ where nothing was remembered (an app
    started in any folder); the first create makes the store."""
    with MemstoreMemoryTool.open(start=tmp_path, settings=Settings.from_environment({})) as tool:
        results = _converse(
            client,
            anthropic_server,
            tool,
            {"command": "view", "path": "/memories"},
            {"command": "view", "path": "/memories/tabs.md"},
            {"command": "str_replace", "path": "/memories/tabs.md", "old_str": "a", "new_str": "b"},
            {"command": "delete", "path": "/memories/tabs.md"},
        )
        assert not (tmp_path / ".memory").exists()
        listing, *missing = results
        assert not listing.get("is_error") and "/memories/" not in str(listing["content"])
        for result in missing:
            assert result["is_error"] and "does not exist" in str(result["content"])
        _converse(
            client,
            anthropic_server,
            tool,
            {"command": "create", "path": "/memories/tabs.md", "file_text": "Indent with tabs.\n"},
        )
        assert (tmp_path / ".memory" / "tabs.md").is_file()
        assert _runs(tool) == [("memory_tool", "memory_tool create /memories/tabs.md")]
