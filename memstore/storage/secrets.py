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

Every quantifier is bounded (and possessive where backtracking could not help), and the text
scanned is capped at SCAN_MAX_CHARS, so the check is linear and quick even on hostile input.
Text beyond the cap is NOT scanned: callers cap their fields far below it (a memory body is at
most 100 kB), and must keep doing so.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import itertools
import json
import re
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

SCAN_MAX_CHARS = 1_000_000


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


_TRAILING_PUNCTUATION = ".,;:!?)]}>。，；：！？）"
# A password of digits only is a password when it is long enough to be one (a PIN, a
# phone-style password), not a count or a year.
_DIGITS_PASSWORD = re.compile(r"\d{6,}")


def _looks_like_password(value: str, *, short: bool = False) -> bool:
    """A value after a word that says "password": not a placeholder, a word or a number.

    `short`: the value was given where only a password goes (mysql -p…), so 1-3
    characters count too."""
    if value[:1] in "\"'" and value[-1:] == value[:1] and len(value) >= 2:
        value = value[1:-1]
    if not short:
        stripped = value.rstrip(_TRAILING_PUNCTUATION)
        # "Sunflower!" is a password; "hunter2." ends a sentence.
        value = stripped if len(stripped) >= 4 else value
    if not value or value.startswith("-"):
        return False
    return _looks_secret(value) or bool(_DIGITS_PASSWORD.fullmatch(value))


def _user_and_password(user: str, password: str) -> bool:
    """user:password, unless it is the documentation's user:pass or a placeholder."""
    if user.lower() in ("user", "username", "login", "name") and password.lower() in (
        "pass",
        "password",
        "passwd",
    ):
        return False
    return _looks_like_password(password, short=True)


def _basic_credentials(value: str) -> bool:
    """Base64 of user:password (RFC 7617), unless a documentation placeholder."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon) and _user_and_password(user, password)


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
        # With or without "Authorization:" before it (curl -H, a Postman note, prose).
        "bearer token",
        re.compile(r"(?i)\bbearer\s{1,5}(?P<value>[\w.~+/-]{16,4096}+=*)"),
        ("bearer",),
        check=lambda match: _looks_secret(match["value"]),
    ),
    _Rule(
        "basic auth credentials",
        re.compile(
            r"(?i)\bauthorization[\"']?\s{0,5}[:=]\s{0,5}[\"']?\s{0,3}basic\s{1,5}"
            r"(?P<value>[A-Za-z0-9+/]{8,4096}+={0,2})"
        ),
        ("basic",),
        check=lambda match: _basic_credentials(match["value"]),
    ),
    _Rule(
        "Twilio API key or account SID",
        re.compile(r"\b(?:SK|AC)[0-9a-f]{32}\b"),
        ("SK", "AC"),
    ),
    _Rule(
        "Telegram bot token",
        re.compile(r"\b\d{8,10}:AA[\w-]{33}(?![\w-])"),
        (":AA",),
    ),
    _Rule(
        # mysql -pS3cr3t (the password glued to -p; a bare -p asks for it), and the
        # other MySQL/MariaDB clients.
        "password on a command line",
        re.compile(
            r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb(?:-dump)?)\b"
            r"[^\n]{0,200}?[ \t]-p(?P<value>\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|[^\s\"'`]{1,256})"
        ),
        ("mysql", "mariadb"),
        check=lambda match: _looks_like_password(match["value"], short=True),
    ),
    _Rule(
        # --password S3cr3t, --token=…, sshpass -p S3cr3t.
        "password on a command line",
        re.compile(
            r"(?i)(?<![\w-])(?:--(?:password|passwd|pass|pwd|api-?key|token|secret|auth-token"
            r"|access-token|client-secret)|sshpass[ \t]{1,5}-p)(?:=|[ \t]{1,5})"
            r"(?P<value>\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|[^\s\"'`]{1,256})"
        ),
        (
            "--pass",
            "--pwd",
            "--api",
            "--token",
            "--secret",
            "--auth",
            "--access",
            "--client",
            "sshpass",
        ),
        check=lambda match: _looks_like_password(match["value"], short=True),
    ),
    _Rule(
        # curl -u user:password, wget --user, httpie -a.
        "password on a command line",
        re.compile(
            r"(?<![\w-])(?:-u|--user|-a|--auth)[ \t=]{1,5}[\"']?(?P<user>[^\s:\"'@/]{1,64}):"
            r"(?P<value>[^\s\"'@]{1,256})(?![^\s\"'])"
        ),
        ("-u ", "-u\t", "-u=", "--user", "-a ", "-a\t", "-a=", "--auth"),
        check=lambda match: _user_and_password(match["user"], match["value"]),
    ),
    _Rule(
        # ~/.netrc: machine HOST login USER password PASSWORD.
        "password",
        re.compile(
            r"(?i)\bmachine\s{1,5}\S{1,256}\s{1,5}login\s{1,5}\S{1,256}\s{1,5}password\s{1,5}"
            r"(?P<value>\S{1,256})"
        ),
        ("machine",),
        check=lambda match: _looks_like_password(match["value"], short=True),
    ),
    _Rule(
        # In prose: "my password is hunter2", "the admin password for staging is Sunfl0wer!",
        # "password was changed to S3cr3t!".
        "password",
        re.compile(
            r"(?i)\b(?:passw(?:or)?d|passphrase|passcode)s?\b"
            r"(?:[ \t]{1,3}(?:for|of|to|on|at)(?:[ \t]{1,3}[^\s:=]{1,40}){1,4}?)?"
            r"[ \t]{1,3}(?:is|was|are|were|is[ \t]now|set[ \t]to|changed[ \t]to|became|reads)"
            r"[ \t:]{1,3}[\"'`“‘]?(?P<value>[^\s\"'`”’]{4,128})"
        ),
        ("passw", "passphrase", "passcode"),
        check=lambda match: _looks_like_password(match["value"]),
    ),
    _Rule(
        # In Chinese: 服务器的密码是 Qwer1234!, 数据库密码：Zx82kfP0q9, 口令为 …
        "password",
        re.compile(
            r"(?:密码|口令|密钥|令牌|暗码|通行码|秘钥)[^\s，。；,;:：=]{0,8}?(?:是|为|:|：|=)"
            r"[ \t]{0,3}[\"'“‘「]?(?P<value>[\x21-\x7e]{4,128})"
        ),
        ("密码", "口令", "密钥", "令牌", "暗码", "通行码", "秘钥"),
        check=lambda match: _looks_like_password(match["value"]),
    ),
]

# More vendors' tokens, each known by its prefix: (kind, prefix, the rest of the format).
_VENDOR_TOKENS = [
    ("PyPI token", "pypi-AgEIcHlwaS5vcmc", r"[\w-]{50,1024}"),
    ("DigitalOcean token", "dop_v1_", "[a-f0-9]{64}"),
    ("DigitalOcean token", "doo_v1_", "[a-f0-9]{64}"),
    ("DigitalOcean token", "dor_v1_", "[a-f0-9]{64}"),
    ("Shopify token", "shpat_", "[a-fA-F0-9]{32}"),
    ("Shopify token", "shpss_", "[a-fA-F0-9]{32}"),
    ("Shopify token", "shpca_", "[a-fA-F0-9]{32}"),
    ("Shopify token", "shppa_", "[a-fA-F0-9]{32}"),
    ("Docker Hub token", "dckr_pat_", r"[\w-]{27,64}"),
    ("Vault token", "hvs.", r"[\w-]{90,512}"),
    ("Vault token", "hvb.", r"[\w-]{90,512}"),
    ("Grafana token", "glsa_", "[A-Za-z0-9_+/=-]{32,256}"),
    ("Grafana token", "glc_", "[A-Za-z0-9_+/=-]{32,256}"),
    ("Postman key", "PMAK-", "[a-f0-9]{24}-[a-f0-9]{34}"),
    ("New Relic key", "NRAK-", "[A-Z0-9]{27}"),
    ("Sentry token", "sntrys_", r"[\w+/=-]{32,256}"),
    ("Sentry token", "sntryu_", r"[\w+/=-]{32,256}"),
    ("Linear key", "lin_api_", "[A-Za-z0-9]{40}"),
    ("Notion token", "ntn_", "[A-Za-z0-9]{40,64}"),
    ("Figma token", "figd_", r"[\w-]{40,64}"),
    ("Groq key", "gsk_", "[A-Za-z0-9]{48,64}"),
    ("xAI key", "xai-", "[A-Za-z0-9]{60,100}"),
    ("Replicate token", "r8_", "[A-Za-z0-9]{37}"),
    ("Perplexity key", "pplx-", "[A-Za-z0-9]{40,64}"),
    ("Supabase token", "sbp_", "[a-f0-9]{40}"),
    ("PlanetScale token", "pscale_tkn_", r"[\w-]{32,64}"),
    ("Pulumi token", "pul-", "[a-f0-9]{40}"),
    ("Databricks token", "dapi", "[a-f0-9]{32}"),
    ("Google OAuth client secret", "GOCSPX-", r"[\w-]{28}"),
    ("Google OAuth token", "ya29.", r"[\w-]{30,1024}"),
    ("Brevo key", "xkeysib-", "[a-f0-9]{64}-[A-Za-z0-9]{16}"),
    ("Square token", "sq0atp-", r"[\w-]{22,64}"),
    ("Square token", "sq0csp-", r"[\w-]{22,64}"),
    ("Mailgun key", "key-", "[a-f0-9]{32}"),
    ("age secret key", "AGE-SECRET-KEY-1", "[0-9A-Z]{58}"),
    ("Atlassian token", "ATATT3", r"[\w=-]{150,400}"),
]
_RULES += [
    _Rule(kind, re.compile(r"\b" + re.escape(prefix) + rest + r"(?![\w-])"), (prefix,))
    for kind, prefix, rest in _VENDOR_TOKENS
]
_RULES.append(
    _Rule(
        "Terraform Cloud token",
        re.compile(r"\b[A-Za-z0-9]{14}\.atlasv1\.[\w-]{60,128}(?![\w-])"),
        ("atlasv1",),
    )
)

# Rules that match a value of any shape after a word that names a secret, and the others.
_GENERIC_KINDS = frozenset(
    [
        "password",
        "password on a command line",
        "password in a URL",
        "bearer token",
        "basic auth credentials",
    ]
)
# Each rule with whether it ignores case, and its needles as one pattern (one C-level
# search per rule: testing needles one by one in Python cost more than the patterns).
_PREPARED = [
    (
        rule,
        bool(rule.pattern.flags & re.IGNORECASE),
        re.compile("|".join(re.escape(needle) for needle in rule.needles)),
    )
    for rule in _RULES
]
_PREPARED_FORMATS = [prepared for prepared in _PREPARED if prepared[0].kind not in _GENERIC_KINDS]

# The generic rule: KEY = value, or KEY: value, the key naming a secret. Reported only where
# no specific rule matched, so that the finding names the most precise kind.
_ASSIGNMENT_KIND = "secret assignment"
_ASSIGNMENT_NEEDLES = ("passw", "passphrase", "pwd", "secret", "token", "key")
_ASSIGNMENT = re.compile(
    r"(?<![\w.-])"
    # Atomic: every way of reading the key ends at the same ":" or "=", so when the value
    # fails after one, it fails after all.
    r"(?P<key>(?>[\w.-]{0,40}?"
    r"(?i:passw(?:or)?d|passphrase|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key)"
    r"(?:[_.-][\w.-]{0,30}+|[A-Z][\w.-]{0,30}+)?))"
    r"(?:[\"']\]?)?\s{0,5}[:=]\s{0,5}"
    r"(?:(?P<quote>[\"'])(?P<quoted>[^\s\"'\\]{4,256}+)(?P=quote)"
    r"|(?P<bare>[^\s\"'`()\[\]{}<>,;]{4,256}+)(?=[\s,;\"'`)\]}]|$))"
)
# The words a key of _ASSIGNMENT must hold: the rule is tried only where one occurs (at the
# start of its key), which keeps the scan linear in those words rather than in the text.
_ASSIGNMENT_WORD = re.compile(
    r"(?i)passw(?:or)?d|passphrase|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key"
)
_ASSIGNS = re.compile("[:=]")
# The start of the key a word is part of: the first place from which only key characters
# lead up to the word.
_KEY_START = re.compile(r"(?<![\w.-])[\w.-]{0,40}?\Z")
# Keys whose value is a password: it may be short (password: hunter2), or digits only.
_PASSWORD_KEY = re.compile(r"(?i)passw(?:or)?d|passphrase|pwd")


def _credible_assignment(match: re.Match[str]) -> bool:
    value = match["quoted"] or match["bare"]
    if _NOT_A_SECRET_KEY.search(match["key"]):
        return False
    if _PASSWORD_KEY.search(match["key"]):
        return _looks_like_password(value, short=True) and len(value) >= 4
    return len(value) >= 8 and _looks_secret(value)


def _assignments(text: str) -> Iterator[re.Match[str]]:
    """The matches of _ASSIGNMENT, tried at the start of each key that holds one of its
    words and is followed closely enough by ":" or "="."""
    covered = tried = 0
    for word in _ASSIGNMENT_WORD.finditer(text):
        if word.start() < covered or not _ASSIGNS.search(text, word.end(), word.end() + 45):
            continue
        key = _KEY_START.search(text, max(covered, tried, word.start() - 40), word.start())
        if key is None:  # a key longer than the rule allows, or one tried already
            continue
        tried = key.start() + 1
        match = _ASSIGNMENT.match(text, key.start())
        if match is not None:
            covered = match.end()
            yield match


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
    for rule, ignore_case, needles in _PREPARED if generic else _PREPARED_FORMATS:
        if not needles.search(lowered if ignore_case else text):
            continue
        for match in rule.pattern.finditer(text):
            if rule.check is not None and not rule.check(match):
                continue
            found.append(SecretFinding(rule.kind, match.start(), _mask(match.group()), match.end()))
            spans.append(match.span())
    # The spans found so far by start, with the furthest end up to each: an assignment
    # overlaps one of them iff some span starting before its end ends after its start.
    spans.sort()
    starts = [start for start, _ in spans]
    furthest = list(itertools.accumulate((end for _, end in spans), max))
    assignments = (
        _assignments(text)
        if generic and any(needle in lowered for needle in _ASSIGNMENT_NEEDLES)
        else ()
    )
    for match in assignments:
        start, end = match.span()
        before = bisect.bisect_left(starts, end) - 1
        if before >= 0 and furthest[before] > start:
            continue
        if _credible_assignment(match):
            found.append(SecretFinding(_ASSIGNMENT_KIND, start, _mask(match.group()), end))
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


def _mask(secret: str) -> str:
    return secret[:6] + "…" if len(secret) > 8 else "…"
