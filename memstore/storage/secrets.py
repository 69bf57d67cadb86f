"""A deterministic check for secrets, run on everything the model asks us to remember.

High-confidence patterns only: each one matches a credential format that ordinary prose and
code do not produce by accident, so a memory is refused for a real reason. The model is also
told not to keep secrets; this check is what makes that a guarantee rather than a hope.

Besides the vendor formats, one generic rule catches assignments such as
`DB_PASSWORD=s3cr3tvalue` or `"api_key": "…"`: a key naming a password, secret, token or key,
then `=` or `:`, then a literal value of at least 8 characters that is not a placeholder
(`${VAR}`, `<your-key>`, `xxxx`, `changeme`, …), not code (`os.environ[…]`, `self.token`,
`get_password()`), and has a digit or a symbol (so that words and names are not taken for
secrets; a letters-only password is the price of that).

Passwords are also caught where people write them: in prose ("my password is hunter2",
"服务器的密码是 Qwer1234!"), on command lines (`mysql -pS3cr3t`, `--password S3cr3t`,
`curl -u me:S3cr3t`), in `Authorization: Basic …` headers and `.netrc` lines. A password
named by its key (`password: hunter2`) may be as short as 4 characters; other values need 8.

Text is normalised before matching (NFKC turns fullwidth letters into ASCII; zero-width and
other invisible format characters are removed), so a disguised key is still a key.
`memory_secret` checks a memory as a whole: its name, each field, and a key split between
the end of the description and the start of the body.

Every quantifier is bounded or possessive (where unbounded, over a class that ends where the
next try of the rule starts, so that tries do not read the same text twice), and a value
longer than a rule's bound is read on to its end: the check is linear and quick even on
hostile input, and a long value is judged whole. `find_secrets` reads at most SCAN_MAX_CHARS;
`memory_secret` refuses a memory with more (TooLongToCheck) rather than store what it has not
read.

The rules are in `secret_rules` and `secret_encoded` (what shows once decoded: a key in
base64, a SAS signature, a URL percent-encoded); whether a value they match is a secret, in
`secret_values`.
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
import unicodedata
from typing import Any, NamedTuple

from memstore.errors import SecretRefused, TooLongToCheck
from memstore.storage.secret_rules import (
    ASSIGNMENT_KIND,
    ASSIGNMENT_NEEDLES,
    PREPARED,
    PREPARED_FORMATS,
    assignment_matches,
    credible_assignment,
)

# As much as the largest file import reads (1 MiB), so that any memory a door accepts is read
# whole (a body is at most 100 kB; frontmatter is the rest of a file); more is refused, not
# stored unread. The check is linear: this bounds the time of one write.
SCAN_MAX_CHARS = 1_048_576
# The kind of a finding that is no secret but text past SCAN_MAX_CHARS (see `refusal`).
TOO_LONG_KIND = "text too long to check"


class SecretFinding(NamedTuple):
    kind: str
    # Where it starts and ends in the normalised text, and a masked preview that is safe
    # to log.
    offset: int
    preview: str
    end: int = 0


# Invisible characters that can hide inside a key without changing how it reads: the
# Unicode format characters (category Cf: zero-width space and joiners, soft hyphen, bidi
# controls, BOM, tags), the combining grapheme joiner, variation selectors, Hangul fillers.
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
    "\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0f"
    "\ufeff\uffa0\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
    "\U000e0100-\U000e01ef]"
)


def normalise(text: str) -> str:
    """The text as it reads: NFKC (fullwidth ｇｈｐ＿ is ghp_), invisible characters removed."""
    if text.isascii():
        return text
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    return _INVISIBLE.sub("", text)


def find_secrets(text: str, *, generic: bool = True) -> list[SecretFinding]:
    """Every secret-looking span in `text`, in order of position in the normalised text.

    `generic=False`: only the rules of fixed formats (vendor keys, private keys, tokens),
    not those that take any value after a word such as "password".
    Only the first SCAN_MAX_CHARS characters are scanned (see the module's docstring)."""
    text = normalise(text[:SCAN_MAX_CHARS])
    # casefold, not lower: as the regular expressions' ignore-case, it takes "ſ" for "s".
    lowered = text.casefold()
    found: list[SecretFinding] = []
    spans: list[tuple[int, int]] = []
    for rule, ignore_case, needles in PREPARED if generic else PREPARED_FORMATS:
        if not needles.search(lowered if ignore_case else text):
            continue
        for match in rule.pattern.finditer(text):
            if rule.check is not None and not rule.check(match):
                continue
            kind = rule.kind_of(match)
            found.append(SecretFinding(kind, match.start(), _mask(match.group()), match.end()))
            spans.append(match.span())
    # The spans found so far by start, with the furthest end up to each: an assignment
    # overlaps one of them iff some span starting before its end ends after its start.
    spans.sort()
    starts = [start for start, _ in spans]
    furthest = list(itertools.accumulate((end for _, end in spans), max))
    assignments = (
        assignment_matches(text)
        if generic and any(needle in lowered for needle in ASSIGNMENT_NEEDLES)
        else ()
    )
    for assignment in assignments:
        start, end = assignment.start, assignment.end
        before = bisect.bisect_left(starts, end) - 1
        if before >= 0 and furthest[before] > start:
            continue
        if credible_assignment(assignment):
            found.append(SecretFinding(ASSIGNMENT_KIND, start, _mask(text[start:end]), end))
    return sorted(found, key=lambda finding: finding.offset)


# How much of each side of the description/body boundary is searched for a split secret:
# more than the longest credential format (an Atlassian token, 192 characters), plus context.
_SPLIT_WINDOW = 512


class MemorySecret(NamedTuple):
    """Where in a memory a secret was found ("name", "description", "body", "extra", or
    "description and body" for one split between them), and what it looks like."""

    field: str
    finding: SecretFinding


def memory_secret(
    name: str,
    description: str,
    body: str,
    extra: dict[str, Any] | None = None,
    others: dict[str, Any] | None = None,
) -> MemorySecret | None:
    """The first secret in a memory, checked as a whole, or None.

    The name is read as words (a name made from text, as /remember does, can carry a
    password); frontmatter kept in `extra` is checked as JSON, as are `others`, the values
    of the memory's other fields searched (storage/fields.py), each under its name."""
    fields = [("name", name.replace("-", " ")), ("description", description), ("body", body)]
    if extra:
        fields.append(("extra", json.dumps(extra, ensure_ascii=False, default=str)))
    for key, value in (others or {}).items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        fields.append((key, text))
    # One scan of the fields on lines of their own (a line break also joins "password:" at
    # the end of the description to its value at the start of the body)...
    texts = [normalise(text) for _, text in fields]
    length = sum(len(text) + 1 for text in texts) - 1
    if length > SCAN_MAX_CHARS:
        longest = max(range(len(texts)), key=lambda index: len(texts[index]))
        finding = SecretFinding(TOO_LONG_KIND, SCAN_MAX_CHARS, "…", length)
        return MemorySecret(fields[longest][0], finding)
    found = find_secrets("\n".join(texts))
    if found:
        ends = list(itertools.accumulate(len(text) + 1 for text in texts))
        first = found[0]
        start_field = fields[bisect.bisect_right(ends, first.offset)][0]
        end_field = fields[min(bisect.bisect_right(ends, first.end - 1), len(fields) - 1)][0]
        where = start_field if start_field == end_field else f"{start_field} and {end_field}"
        return MemorySecret(where, first)
    # ... and a vendor key cut in two between description and body, joined with nothing
    # between: only fixed formats (words that happen to meet make none) that cross the join.
    head, tail = texts[1][-_SPLIT_WINDOW:], texts[2][:_SPLIT_WINDOW]
    for finding in find_secrets(head + tail, generic=False):
        if finding.offset < len(head) < finding.end:
            return MemorySecret("description and body", finding)
    return None


def refusal(found: MemorySecret, name: str | None = None) -> SecretRefused:
    """The error that refuses a memory for what memory_secret found."""
    if found.finding.kind == TOO_LONG_KIND:
        return TooLongToCheck(found.field, found.finding.end, SCAN_MAX_CHARS, name)
    return SecretRefused(found.field, found.finding.kind, name)


def _mask(secret: str) -> str:
    return secret[:6] + "…" if len(secret) > 8 else "…"
