"""Reading a model's reply: the JSON value it was asked for, wherever in the text it is."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
_MAX_JSON_STARTS = 20


def json_from_reply(reply: str, kind: type[list[Any]] | type[dict[str, Any]]) -> Any:
    """The first JSON value of `kind` (list or dict) in a model's reply: inside a code fence
    or prose too. Raises ValueError when there is none."""
    opener = "[" if kind is list else "{"
    decoder = json.JSONDecoder()
    fenced = [match.group(1) for match in _FENCE.finditer(reply)]
    for candidate in [*fenced, reply]:
        start = candidate.find(opener)
        # A bounded number of tries: a hostile reply of ten thousand '[' must not take
        # quadratic time.
        for _ in range(_MAX_JSON_STARTS):
            if start == -1:
                break
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError:
                pass
            else:
                if isinstance(value, kind):
                    return value
            start = candidate.find(opener, start + 1)
    what = "array" if kind is list else "object"
    raise ValueError(f"no JSON {what} in the reply {reply[:80]!r}")
