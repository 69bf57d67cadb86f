"""A scripted Anthropic-compatible HTTP server on 127.0.0.1, for driving the real client.

Each POST to /v1/messages takes the next scripted reply and records the request, so a test
can assert both what memstore sent and what it did with the answer. Replies are built with
text_reply(), tool_reply(), error_reply() or slow_reply(); when the script runs out the
server answers 500. A request with "stream": true gets the reply as server-sent events, the
way the real API streams it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ScriptedReply:
    status: int
    body: dict[str, Any]
    delay: float = 0.0
    # For a streamed request: an error event sent after the first text, as the real API
    # does when it is overloaded in the middle of an answer.
    midstream_error: dict[str, Any] | None = None
    # For a streamed request: seconds to wait after the first text, with the answer begun
    # (a test presses Ctrl-C then).
    pause: float = 0.0
    # Answer only once the test sets it: the model is "thinking" for as long as the test
    # needs, however slow the machine (at most a minute).
    gate: threading.Event | None = None


def message_reply(
    content: list[dict[str, Any]],
    stop_reason: str,
    *,
    input_tokens: int = 10,
    output_tokens: int = 5,
    cache_read: int = 0,
    cache_creation: int = 0,
) -> ScriptedReply:
    return ScriptedReply(
        200,
        {
            "id": "msg_scripted",
            "type": "message",
            "role": "assistant",
            "model": "scripted",
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cache_read_input_tokens": cache_read,
                "cache_creation_input_tokens": cache_creation,
            },
        },
    )


def text_reply(text: str, **usage: int) -> ScriptedReply:
    return message_reply([{"type": "text", "text": text}], "end_turn", **usage)


def tool_reply(*calls: tuple[str, dict[str, Any]], text: str = "", **usage: int) -> ScriptedReply:
    """The model asks for tool calls, each (name, input); ids are toolu_0, toolu_1, ..."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": arguments}
        for i, (name, arguments) in enumerate(calls)
    ]
    return message_reply(content, "tool_use", **usage)


def raw_tool_reply(name: str, raw_input: str) -> ScriptedReply:
    """For a streamed request: a tool call whose input is `raw_input` as sent, unparsed."""
    block = {"type": "tool_use", "id": "toolu_0", "name": name, "input": {}, "raw_input": raw_input}
    return message_reply([block], "tool_use")


def midstream_error_reply(
    kind: str = "overloaded_error", message: str = "Overloaded"
) -> ScriptedReply:
    reply = text_reply("This answer will break off")
    reply.midstream_error = {"type": "error", "error": {"type": kind, "message": message}}
    return reply


def truncated_stream_reply(text: str = "This answer stops short") -> ScriptedReply:
    """For a streamed request: the stream ends after the first text, with no message_stop
    (a connection closed early)."""
    reply = text_reply(text)
    reply.midstream_error = {"type": "ping"}  # sent instead of the rest of the message
    return reply


def paused_reply(text: str, seconds: float) -> ScriptedReply:
    """Streamed: the first 20 characters of `text`, a pause of `seconds`, then the rest."""
    reply = text_reply(text)
    reply.pause = seconds
    return reply


def error_reply(status: int, kind: str, message: str = "scripted failure") -> ScriptedReply:
    return ScriptedReply(status, {"type": "error", "error": {"type": kind, "message": message}})


def slow_reply(seconds: float, text: str = "[]") -> ScriptedReply:
    reply = text_reply(text)
    reply.delay = seconds
    return reply


def gated_reply(text: str, gate: threading.Event) -> ScriptedReply:
    """A reply sent once the test sets `gate` (see ScriptedReply.gate)."""
    reply = text_reply(text)
    reply.gate = gate
    return reply


@dataclass
class AnthropicServer:
    replies: list[ScriptedReply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""
    # Answers by what is asked, instead of the script's order: for clients whose calls
    # interleave (Claude Code and the learning worker its hook starts).
    responder: Callable[[dict[str, Any]], ScriptedReply] | None = None

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
            state.responder(payload)
            if state.responder is not None
            else state.replies.pop(0)
            if state.replies
            else error_reply(500, "api_error", "the test script has no reply left")
        )
        if reply.delay:
            time.sleep(reply.delay)
        if reply.gate is not None:
            reply.gate.wait(60)
        streamed = bool(payload.get("stream")) and reply.status == 200
        parts = (
            _events(reply.body, reply.midstream_error)
            if streamed
            else [json.dumps(reply.body).encode()]
        )
        try:
            self.send_response(reply.status)
            self.send_header(
                "content-type", "text/event-stream" if streamed else "application/json"
            )
            self.send_header("content-length", str(sum(map(len, parts))))
            self.end_headers()
            for index, part in enumerate(parts):
                if index and reply.pause:
                    time.sleep(reply.pause)
                self.wfile.write(part)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    def log_message(self, *_: Any) -> None:
        pass


def _events(message: dict[str, Any], error: dict[str, Any] | None = None) -> list[bytes]:
    """A message as the stream of server-sent events the real API sends for it, in two
    parts: up to the first text delta, and the rest. With `error`, the stream breaks off
    with that error event after the first text delta."""
    usage = message["usage"]
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                **message,
                "content": [],
                "stop_reason": None,
                "usage": {**usage, "output_tokens": 1},
            },
        }
    ]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                }
            )
            text = block["text"]
            for start in range(0, len(text), 20):  # several deltas, as a real stream has
                delta = {"type": "text_delta", "text": text[start : start + 20]}
                events.append({"type": "content_block_delta", "index": index, "delta": delta})
                if error is not None:
                    return [_encode([*events, error])]
        else:
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        **{k: v for k, v in block.items() if k != "raw_input"},
                        "input": {},
                    },
                }
            )
            # "raw_input": the input's JSON text exactly as given, broken or not.
            raw = block.get("raw_input", json.dumps(block["input"]))
            delta = {"type": "input_json_delta", "partial_json": raw}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    first_text = next(
        (i + 1 for i, e in enumerate(events) if e["type"] == "content_block_delta"), len(events)
    )
    return [_encode(events[:first_text]), _encode(events[first_text:])]


def _encode(events: list[dict[str, Any]]) -> bytes:
    return "".join(
        f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in events
    ).encode()


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
