"""The one place that talks to the model, through the anthropic SDK (imported lazily).

A model-facing path never trusts or depends on the model: every call here either returns
the reply's text or raises ModelUnavailable with a one-line reason, and callers fall back.
Tests point the real client (ANTHROPIC_BASE_URL or base_url) at a scripted local server.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memstore.errors import MemstoreError
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
# Where ask_text reports the usage of its calls (see metered).
_meters: list[Usage] = []


@contextmanager
def metered(usage: Usage) -> Iterator[Usage]:
    """Add the tokens of every ask_text call made inside the block to `usage`."""
    _meters.append(usage)
    try:
        yield usage
    finally:
        # By identity: list.remove compares by value, and two meters at zero are equal (a
        # sub-agent's would remove its parent's).
        del _meters[next(i for i, meter in enumerate(_meters) if meter is usage)]


class ModelUnavailable(MemstoreError):
    """The model could not be asked, or did not answer usably; the reason is the message."""


def model_name() -> str:
    return Settings.from_environment().model


def small_model_name() -> str:
    """The model for selection and extraction: cheap, quick calls."""
    return Settings.from_environment().small_model


def make_client(
    *, api_key: str | None = None, base_url: str | None = None, max_retries: int = 2
) -> Anthropic | None:
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

    return Anthropic(
        api_key=api_key or (None if token else "no-key"),
        base_url=base_url,
        timeout=60.0,
        max_retries=max_retries,
    )


def ask_text(
    client: Anthropic,
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
        reply: Any = client.with_options(timeout=timeout, max_retries=max_retries).messages.create(
            model=model,
            max_tokens=max_tokens,
            system=system,
            messages=[{"role": "user", "content": prompt}],
        )
    except anthropic.APITimeoutError:
        raise ModelUnavailable(f"the model did not answer within {timeout:g} s") from None
    except anthropic.APIConnectionError as error:
        raise ModelUnavailable(f"cannot reach the model API: {error_message(error)}") from None
    except anthropic.APIStatusError as error:
        raise ModelUnavailable(
            f"the model API answered {error.status_code}: {error_message(error)}"
        ) from None
    except anthropic.AnthropicError as error:
        raise ModelUnavailable(f"model call failed: {error_message(error)}") from None
    for meter in _meters:
        meter.add(getattr(reply, "usage", None))
    texts = [block.text for block in reply.content if getattr(block, "type", None) == "text"]
    if not texts:
        raise ModelUnavailable("the model's reply has no text")
    return "".join(texts)


def error_message(error: Any) -> str:
    """The API's own message in an error response, else the exception's, without a closing
    full stop: it is quoted inside our own sentences ("Connection error.;" read badly)."""
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        detail = body.get("error")
        if isinstance(detail, dict) and detail.get("message"):
            return str(detail["message"]).rstrip(".")
    return str(getattr(error, "message", error)).rstrip(".")
