"""The store the page's tests browse (tests/test_ui*.py): memories in English and Chinese,
one edited, one deleted, a consolidation that merged two and dropped one (the model's reason
hostile too), and hostile memories whose text tries to become markup, script, links or
terminal and bidi tricks."""

from __future__ import annotations

from typing import Any

from memstore.storage.store import MemoryStore

# What memory text must never do on the page: close an element, run a script, make a link
# that runs code, read in another order (bidi), hide text (tags), or drive a terminal.
HOSTILE: list[dict[str, Any]] = [
    {
        "name": "closing-tags",
        "description": "</td></tr></table></pre></textarea></title><h1 id=injected>owned</h1>",
        "body": "</code></pre><div id=injected>owned</div><!--",
    },
    {
        "name": "script-tags",
        "description": "<script>document.title='owned'</script>",
        "body": "<img src=x onerror=\"document.title='owned'\"><svg onload=alert(1)>"
        "<script src=/static/ui.css></script><style>body{display:none}</style>",
    },
    {
        "name": "javascript-links",
        "description": '[click](javascript:alert(1)) <a href="javascript:alert(1)">x</a>',
        "body": "<a id=injected href='javascript:alert(document.cookie)'>link</a>"
        " <iframe src=javascript:alert(1)></iframe> <meta http-equiv=refresh content=0;url=/>",
    },
    {
        "name": "bidi-and-tags",
        "description": "safe \u202eevil\u202c and \u2066isolated\u2069 \u200fmark",
        "body": "hidden \U000e0069\U000e0067\U000e006e\U000e006f\U000e0072\U000e0065 tags",
    },
    {
        "name": "ansi-escapes",
        "description": "terminal escapes in the body (a description refuses them)",
        "body": "red \x1b[31mred\x1b[0m title \x1b]0;owned\x07 clear \x1b[2J\x1b[H C1 \x9b31m",
    },
]
# A run's command line is text too (an MCP client's, a hook's).
HOSTILE_COMMAND = "memctl add </code><script>alert(1)</script> \u202e \x1b[2J"
# A consolidation's reason for a drop is the model's words, shown on the run's page.
DROP_REASON = "Replaced by <b id=injected>ninja</b> \u202eevil\u202c notes"
HOSTILE_EXTRA = {
    "<b id=injected>key</b>": "<script>alert(1)</script>",
    "link": "javascript:alert(1)",
}


def fill(store: MemoryStore) -> dict[str, str]:
    """The scenario; returns the ids of its notable runs: edit, consolidation, drop."""
    store.create("deploy-notes", "project", "How we deploy to staging", "Run make deploy.")
    store.create("deploy-chinese", "project", "自动部署流程", "我们用 CI 自动部署到预发布环境。")
    store.create("tabs", "user", "Indentation preference", "Four spaces, never tabs.")
    store.create("old-link", "reference", "An old link", "https://example.org/old")
    store.create("style-a", "feedback", "Style rule one", "Prefer small functions.")
    store.create("style-b", "feedback", "Style rule two", "Prefer small modules.")
    store.create("stale", "project", "A stale fact", "The build uses make 3.")
    store.update("deploy-notes", body="Run make deploy-staging, then check the dashboard.")
    edit = store.history.events("deploy-notes")[-1].run_id
    store.delete("old-link")
    with store.transaction(actor="consolidation", command="memctl consolidate --yes") as tx:
        target = tx.create(
            "style", "feedback", "Style rules", "Prefer small functions and modules."
        )
        tx.delete(tx.get("style-a"), merged_into=target)
        tx.delete(tx.get("style-b"), merged_into=target)
        tx.delete(tx.get("stale"), reason=DROP_REASON)
        consolidation = tx.run_id
    with store.transaction(command=HOSTILE_COMMAND) as tx:
        for memory in HOSTILE:
            tx.create(memory["name"], "reference", memory["description"], memory["body"])
        tx.create("hostile-extra", "reference", "extra keys", "body", extra=HOSTILE_EXTRA)
        hostile = tx.run_id
    return {"edit": edit, "consolidation": consolidation, "hostile": hostile}
