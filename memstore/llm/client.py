"""The one place that talks to the model, through the anthropic SDK (imported lazily).

A model-facing path never trusts or depends on the model: every call here either returns
the reply or raises ModelUnavailable with a one-line reason, and callers fall back. Each
ModelClient counts the tokens of its calls in its own Usage: whoever wants a count of their
own (the agent, its memory) asks through a view made with counting(), nothing global.
Tests point the real client (ANTHROPIC_BASE_URL or base_url) at a scripted local server.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memstore.errors import ModelUnavailable, PromptTooLong, UnparseableReply
from memstore.settings import Settings

if TYPE_CHECKING:
    from anthropic import Anthropic


@dataclass
class Usage:
    """Tokens of model calls, as the API reported them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    calls: int = 0

    def merge(self, other: Usage) -> None:
        for name in _USAGE_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def add(self, usage: Any) -> None:
        self.calls += 1
        for name in _USAGE_FIELDS[:-1]:
            setattr(self, name, getattr(self, name) + (getattr(usage, name, 0) or 0))


_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "calls",
)


class ModelClient:
    """The door to the model: an anthropic client, and the Usage its calls are counted in."""

    def __init__(self, sdk: Anthropic, usage: Usage | None = None) -> None:
        self.sdk = sdk
        self.usage = usage if usage is not None else Usage()

    def counting(self, usage: Usage) -> ModelClient:
        """The same client, its calls counted in `usage`."""
        return ModelClient(self.sdk, usage)


def model_name() -> str:
    return Settings.from_environment().model


def small_model_name() -> str:
    """The model for selection and extraction: cheap, quick calls."""
    return Settings.from_environment().small_model


def make_client(
    *, api_key: str | None = None, base_url: str | None = None, max_retries: int = 2
) -> ModelClient | None:
    """A client from the arguments or the environment; None when there is no credential and
    no ANTHROPIC_BASE_URL (an Anthropic-compatible local server may not need a key).

    The SDK retries connection errors, 408, 409, 429 and 5xx (overloaded is 529) with
    exponential backoff, `max_retries` times.
    """
    settings = Settings.from_environment()
    api_key = api_key or settings.api_key
    base_url = base_url or settings.base_url
    token = settings.auth_token
    if not api_key and not token and not base_url:
        return None
    from anthropic import Anthropic

    sdk = Anthropic(
        api_key=api_key or (None if token else "no-key"),
        base_url=base_url,
        timeout=60.0,
        max_retries=max_retries,
    )
    return ModelClient(sdk)


def ask_text(
    client: ModelClient,
    *,
    model: str,
    system: str,
    prompt: str,
    max_tokens: int,
    timeout: float = 15.0,
    max_retries: int = 0,
) -> str:
    """The text of the model's reply to one user prompt."""
    import anthropic

    try:
        reply: Any = client.sdk.with_options(
            timeout=timeout, max_retries=max_retries
        ).messages.create(
            model=model,
            max_tokens=max_tokens,
            system=system,
            messages=[{"role": "user", "content": prompt}],
        )
    except anthropic.AnthropicError as error:
        raise unavailable(error, timeout=timeout) from None
    client.usage.add(getattr(reply, "usage", None))
    texts = [block.text for block in reply.content if getattr(block, "type", None) == "text"]
    if not texts:
        raise ModelUnavailable("the model's reply has no text")
    return "".join(texts)


def stream_reply(
    client: ModelClient,
    *,
    model: str,
    max_tokens: int,
    system: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    on_text: Callable[[str], None],
) -> Any:
    """The model's whole reply (the SDK's Message) to one streamed request, its text handed
    to `on_text` as it comes. The SDK retries a refused connection, 429, 529 and 5xx before
    the stream starts; a failure after that is ModelUnavailable, `transient` when asking
    again may work (a dropped connection, an overload in the middle of the stream)."""
    import anthropic

    try:
        with client.sdk.messages.stream(
            model=model,
            max_tokens=max_tokens,
            system=system,  # type: ignore[arg-type]
            tools=tools,  # type: ignore[arg-type]
            messages=messages,  # type: ignore[arg-type]
        ) as stream:
            for delta in stream.text_stream:
                on_text(delta)
            reply = stream.get_final_message()
    except AssertionError:  # the SDK's own check: the stream ended before any message
        raise ModelUnavailable(
            "the answer's stream ended before it began", transient=True
        ) from None
    except ValueError as error:  # the SDK could not parse a tool call's input
        if "JSON" not in str(error):
            raise
        raise UnparseableReply(
            "(my reply held a tool call whose input was not valid JSON)"
        ) from None
    except anthropic.AnthropicError as error:
        raise unavailable(error) from None
    except Exception as error:
        # A connection that breaks mid-stream surfaces as the HTTP library's own error
        # (httpx, or its fork in some builds of the SDK).
        if not type(error).__module__.startswith(("httpx", "httpcore")):
            raise
        broke = f"the connection to the model API broke: {error}"
        raise ModelUnavailable(broke, transient=True) from None
    if reply.stop_reason is None:  # the connection closed before message_stop
        raise ModelUnavailable("the answer's stream ended early", transient=True)
    client.usage.add(reply.usage)
    return reply


def unavailable(error: Any, *, timeout: float | None = None) -> ModelUnavailable:
    """An SDK error as the one-line reason callers show; PromptTooLong when the API refused
    the prompt as too long. `timeout`: the call's own, named when it ran out."""
    import anthropic

    if timeout is not None and isinstance(error, anthropic.APITimeoutError):
        return ModelUnavailable(f"the model did not answer within {timeout:g} s")
    if isinstance(error, anthropic.APIConnectionError):
        reason = f"cannot reach the model API: {error_message(error)}"
        return ModelUnavailable(reason, transient=True)
    if isinstance(error, anthropic.APIStatusError):
        reason = f"the model API answered {error.status_code}: {error_message(error)}"
        if _too_long(error):
            return PromptTooLong(reason)
        # Status 200: the error came inside the stream, after the SDK's retries.
        return ModelUnavailable(reason, transient=error.status_code == 200)
    return ModelUnavailable(f"the model call failed: {error_message(error)}")


def _too_long(error: Any) -> bool:
    text = error_message(error).lower()
    return error.status_code == 413 or "prompt is too long" in text or "too many tokens" in text


def error_message(error: Any) -> str:
    """The API's own message in an error response, else the exception's, without a closing
    full stop: it is quoted inside our own sentences ("Connection error.;" read badly)."""
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        detail = body.get("error")
        if isinstance(detail, dict) and detail.get("message"):
            return str(detail["message"]).rstrip(".")
    return str(getattr(error, "message", error)).rstrip(".")
