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

Every quantifier is bounded (and possessive where backtracking could not help), and the text
scanned is capped at SCAN_MAX_CHARS, so the check is linear and quick even on hostile input.
Text beyond the cap is NOT scanned: callers cap their fields far below it (a memory body is at
most 100 kB), and must keep doing so.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable
from typing import NamedTuple

SCAN_MAX_CHARS = 1_000_000


class SecretFinding(NamedTuple):
    kind: str
    # Where it starts in the text, and a masked preview that is safe to log.
    offset: int
    preview: str


# A value that stands for a secret rather than being one.
_PLACEHOLDER_VALUE = re.compile(
    r"""(?ix)^(?:
        \$.*                                # $VAR, ${VAR}, $(command)
      | <.*> | \{\{.*\}\}? | \{\w*\} | %\(?\w*\)?s  # <your-key>, {{ var }}, {var}, %s
      | (?:x{3,}|\*{3,}|•{3,}).* | .*(?:…|\.\.\.).*  # xxxx, ****, elided: sk-ant-…
      | (.)\1*                              # one character repeated: ########
      | .*(?:change[_-]?me|replace[_-]?me|your[_-]|example|placeholder|dummy|redacted
             |insert[_-]|fill[_-]?in|todo|fixme).*
      | (?:none|null|nil|undefined|true|false|password|passwd|secret|token|required|optional)
    )$"""
)
# Values that are words, names, numbers, dates or versions, paths and URLs: not secrets.
_NOT_A_SECRET_VALUE = re.compile(
    r"""(?ix)^(?:
        (?:[^\W\d]|[.-])*                    # words and (dotted) names: no digit, no symbol
      | [\d.:tz+-]*                         # numbers, dates, times
      | v?\d+(?:\.\d+)+(?:[-+][\w.]*)?      # versions
      | (?:\.{0,2}/|~/).* | .*://.*         # paths and URLs (passwords in URLs: own rule)
      | .*\.(?:pem|key|crt|cer|der|p12|pfx|jks|json|ya?ml|toml|ini|cfg|conf|env|txt)
    )$"""
)
# Keys that name something about a secret, not the secret itself: token_url, secret_name,
# password_file, api_key_id, max_token_count…
_NOT_A_SECRET_KEY = re.compile(
    r"""(?ix)(?:name|ref|file|path|dir|url|uri|endpoint|type|kind|len|length|count|size|ttl
        |expiry|expires|expires_at|expires_in|version|field|header|prefix|env|var|id|arn
        |policy|provider|format|mode|pattern|hash|limit|max|min|timeout|enabled|required
        |rotation)s?$"""
)


def _looks_secret(value: str) -> bool:
    return not _PLACEHOLDER_VALUE.match(value) and not _NOT_A_SECRET_VALUE.match(value)


# A password in a URL that is plainly a placeholder is not a secret.
_PLACEHOLDER_IN_URL = re.compile(
    r"(?i)://[^\s:/@]{0,256}:(?:password|passwd|secret|changeme|your[\w-]{0,64}|<[^>]{0,256}>"
    r"|\$\{?\w{1,256}\}?|\{\{?[^}]{0,256}\}\}?|%s|%\(\w{1,64}\)s|\.\.\.|…)@"
    r"|://(?:user|username|login):pass@"  # user:pass, the documentation's idiom
)


class _Rule(NamedTuple):
    kind: str
    pattern: re.Pattern[str]
    # The rule runs only on a text that holds one of these (case-folded for a
    # case-insensitive pattern): a quick test that spares most texts most patterns.
    needles: tuple[str, ...]
    # A further test of each match, for the rules that need one.
    check: Callable[[re.Match[str]], bool] | None = None


_RULES: list[_Rule] = [
    _Rule("Anthropic API key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,512}"), ("sk-ant-",)),
    _Rule(
        "OpenAI API key",
        re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,512}"),
        ("sk-",),
    ),
    _Rule(
        "AWS access key id",
        re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
        ("AKIA", "ASIA", "ABIA", "ACCA"),
    ),
    _Rule(
        # Also the SecretAccessKey of the AWS CLI's and CloudFormation's YAML and JSON. A key
        # may end in "/" or "+", so the end is "no further key character", not \b.
        "AWS secret access key",
        re.compile(
            r"(?i)(?:aws[_-]?)?secret[_-]?access[_-]?key\W{0,4}[=:]\W{0,2}"
            r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])"
        ),
        ("access",),
    ),
    _Rule(
        "GitHub token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{60,255})"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    _Rule("GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,255}"), ("glpat-",)),
    _Rule(
        "Slack token", re.compile(r"\b(?:xox[abposr]|xapp)-[A-Za-z0-9-]{10,255}"), ("xox", "xapp-")
    ),
    _Rule(
        "Slack webhook",
        re.compile(
            r"https://hooks\.slack\.com/services/T[A-Za-z0-9_]{1,32}+/B[A-Za-z0-9_]{1,32}+/\w{1,64}"
        ),
        ("hooks.slack.com",),
    ),
    _Rule("Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), ("AIza",)),
    _Rule(
        "Stripe secret key",
        re.compile(r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{20,255}"),
        ("k_live_", "k_test_"),
    ),
    _Rule("npm token", re.compile(r"\bnpm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"), ("npm_",)),
    _Rule("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,255}"), ("hf_",)),
    _Rule("SendGrid", re.compile(r"\bSG\.[\w-]{20,30}\.[\w-]{39,50}"), ("SG.",)),
    _Rule(
        "Azure storage key",
        re.compile(r"(?i)\b(?:Account|SharedAccess)Key\s{0,3}=\s{0,3}[A-Za-z0-9+/]{40,128}={0,2}"),
        ("key",),
    ),
    _Rule(
        "private key",
        re.compile(r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,5}PRIVATE KEY(?: BLOCK)?-----"),
        ("PRIVATE KEY",),
    ),
    # scheme://user:password@host, the user possibly empty — a password written into a URL
    # (not a placeholder, nor masked as *** or xxx).
    _Rule(
        "password in a URL",
        re.compile(
            r"\b[a-zA-Z][a-zA-Z0-9+.-]{0,30}+://[^\s:/?#@]{0,256}+:(?![*x]{1,256}+@)"
            r"[^\s/?#@]{1,256}+@[\w.-]{1,256}"
        ),
        ("://",),
        check=lambda match: not _PLACEHOLDER_IN_URL.search(match.group()),
    ),
    _Rule(
        "JSON web token",
        re.compile(
            r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{10,8192}+\.eyJ[A-Za-z0-9_-]{10,8192}+\.[\w-]{10,8192}"
        ),
        ("eyJ",),
    ),
    _Rule(
        "bearer token",
        re.compile(
            r"(?i)\bauthorization[\"']?\s{0,5}[:=]\s{0,5}[\"']?\s{0,3}bearer\s{1,5}"
            r"(?P<value>[\w.~+/=-]{20,4096})"
        ),
        ("bearer",),
        check=lambda match: _looks_secret(match["value"]),
    ),
]

# The generic rule: KEY = value, or KEY: value, the key naming a secret. Reported only where
# no specific rule matched, so that the finding names the most precise kind.
_ASSIGNMENT_KIND = "secret assignment"
_ASSIGNMENT_NEEDLES = ("passw", "secret", "token", "key")
_ASSIGNMENT = re.compile(
    r"(?<![\w.-])"
    r"(?P<key>[\w.-]{0,40}?"
    r"(?i:passw(?:or)?d|secret|token|api[_-]?key|access[_-]?key|private[_-]?key)"
    r"(?:[_.-][\w.-]{0,30}+|[A-Z][\w.-]{0,30}+)?)"
    r"(?:[\"']\]?)?\s{0,5}[:=]\s{0,5}"
    r"(?:(?P<quote>[\"'])(?P<quoted>[^\s\"'\\]{8,256}+)(?P=quote)"
    r"|(?P<bare>[^\s\"'`()\[\]{}<>,;]{8,256}+)(?=[\s,;\"'`)\]}]|$))"
)


def _credible_assignment(match: re.Match[str]) -> bool:
    value = match["quoted"] or match["bare"]
    return not _NOT_A_SECRET_KEY.search(match["key"]) and _looks_secret(value)


def find_secrets(text: str) -> list[SecretFinding]:
    """Every secret-looking span in `text`, in order of position.

    Only the first SCAN_MAX_CHARS characters are scanned (see the module's docstring)."""
    text = text[:SCAN_MAX_CHARS]
    # casefold, not lower: as the regular expressions' ignore-case, it takes "ſ" for "s".
    lowered = text.casefold()
    found: list[SecretFinding] = []
    spans: list[tuple[int, int]] = []
    for rule in _RULES:
        haystack = lowered if rule.pattern.flags & re.IGNORECASE else text
        if not any(needle in haystack for needle in rule.needles):
            continue
        for match in rule.pattern.finditer(text):
            if rule.check is not None and not rule.check(match):
                continue
            found.append(SecretFinding(rule.kind, match.start(), _mask(match.group())))
            spans.append(match.span())
    # The spans found so far by start, with the furthest end up to each: an assignment
    # overlaps one of them iff some span starting before its end ends after its start.
    spans.sort()
    starts = [start for start, _ in spans]
    furthest = list(itertools.accumulate((end for _, end in spans), max))
    assignments = (
        _ASSIGNMENT.finditer(text)
        if any(needle in lowered for needle in _ASSIGNMENT_NEEDLES)
        else ()
    )
    for match in assignments:
        start, end = match.span()
        before = bisect.bisect_left(starts, end) - 1
        if before >= 0 and furthest[before] > start:
            continue
        if _credible_assignment(match):
            found.append(SecretFinding(_ASSIGNMENT_KIND, start, _mask(match.group())))
    return sorted(found, key=lambda finding: finding.offset)


def _mask(secret: str) -> str:
    return secret[:6] + "…" if len(secret) > 8 else "…"
