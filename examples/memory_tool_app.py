"""An app on the Anthropic SDK whose Claude keeps its memory in memstore (docs/integrations.md)."""

import os
import sys

import anthropic

from memstore.integrations.memory_tool import MemstoreMemoryTool

if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
    sys.exit("set ANTHROPIC_API_KEY to run this example")
client = anthropic.Anthropic()  # ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL) from the environment
with MemstoreMemoryTool.open() as memory:  # the store memctl uses in this folder
    runner = client.beta.messages.tool_runner(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        betas=["context-management-2025-06-27"],
        tools=[memory],
        messages=[{"role": "user", "content": "Remember that I indent with tabs."}],
    )
    print(runner.until_done().content[-1].text)
