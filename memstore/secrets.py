"""A deterministic check for secrets, run on everything the model asks us to remember.

High-confidence patterns only: each one matches a credential format that ordinary prose and
code do not produce by accident, so a memory is refused for a real reason. The model is also
told not to keep secrets; this check is what makes that a guarantee rather than a hope.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class SecretFinding(NamedTuple):
    kind: str
    # Where it starts in the text, and a masked preview that is safe to log.
    offset: int
    preview: str


_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("Anthropic API key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("OpenAI API key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}")),
    ("AWS access key id", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b")),
    (
        "AWS secret access key",
        re.compile(r"(?i)aws_?secret_?access_?key\W{0,4}[=:]\W{0,2}[A-Za-z0-9/+]{40}\b"),
    ),
    ("GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{60,})")),
    ("GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    (
        "Slack webhook",
        re.compile(r"https://hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/\w+"),
    ),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("Stripe secret key", re.compile(r"\b[rs]k_live_[0-9A-Za-z]{20,}")),
    ("private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    # scheme://user:password@host — a password written into a URL (not a placeholder).
    (
        "password in a URL",
        re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/?#@]+:(?![*x]+@)[^\s/?#@]{3,}@[\w.-]+"),
    ),
    ("JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[\w-]{10,}")),
]

# A password in a URL that is plainly a placeholder is not a secret.
_PLACEHOLDER = re.compile(
    r"(?i)://[^\s:/@]+:(?:password|passwd|pass|secret|changeme|<[^>]*>|\$\{?\w+\}?)@"
)


def find_secrets(text: str) -> list[SecretFinding]:
    """Every secret-looking span in `text`, in order of position."""
    found: list[SecretFinding] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            if kind == "password in a URL" and _PLACEHOLDER.search(match.group()):
                continue
            found.append(SecretFinding(kind, match.start(), _mask(match.group())))
    return sorted(found, key=lambda finding: finding.offset)


def _mask(secret: str) -> str:
    return secret[:6] + "…" if len(secret) > 8 else "…"
