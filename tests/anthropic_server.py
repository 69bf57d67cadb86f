"""A scripted Anthropic-compatible HTTP server on 127.0.0.1, for driving the real client.

Each POST to /v1/messages takes the next scripted reply and records the request, so a test
can assert both what memstore sent and what it did with the answer. Replies are built with
text_reply(), error_reply() or slow_reply(); when the script runs out the server answers 500.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ScriptedReply:
    status: int
    body: dict[str, Any]
    delay: float = 0.0


def text_reply(text: str, *, input_tokens: int = 10, output_tokens: int = 5) -> ScriptedReply:
    return ScriptedReply(
        200,
        {
            "id": "msg_scripted",
            "type": "message",
            "role": "assistant",
            "model": "scripted",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        },
    )


def error_reply(status: int, kind: str, message: str = "scripted failure") -> ScriptedReply:
    return ScriptedReply(status, {"type": "error", "error": {"type": kind, "message": message}})


def slow_reply(seconds: float, text: str = "[]") -> ScriptedReply:
    reply = text_reply(text)
    reply.delay = seconds
    return reply


@dataclass
class AnthropicServer:
    replies: list[ScriptedReply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""

    def script(self, *replies: ScriptedReply) -> None:
        self.replies.extend(replies)


class _Handler(BaseHTTPRequestHandler):
    server_state: AnthropicServer

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        payload = json.loads(self.rfile.read(length) or b"{}")
        state = self.server_state
        state.requests.append(payload)
        state.headers.append({k.lower(): v for k, v in self.headers.items()})
        reply = (
            state.replies.pop(0)
            if state.replies
            else error_reply(500, "api_error", "the test script has no reply left")
        )
        if reply.delay:
            time.sleep(reply.delay)
        data = json.dumps(reply.body).encode()
        try:
            self.send_response(reply.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    def log_message(self, *_: Any) -> None:
        pass


def serve() -> Iterator[AnthropicServer]:
    state = AnthropicServer()
    handler = type("Handler", (_Handler,), {"server_state": state})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    # A short poll interval: shutdown() waits for it, once per test.
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
