"""The rules of the secret check (memstore.storage.secrets): the credential formats, each known
by its shape and a quick needle; the rules that take a password wherever people write one; and
the generic rule, KEY = value with a key naming a secret.

Every quantifier is bounded (and possessive where backtracking could not help), so each rule
is linear and quick even on hostile input. Their order is the order of kinds reported for
matches that start at the same place.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import NamedTuple

from memstore.storage.secret_encoded import ENCODED_RULES
from memstore.storage.secret_values import (
    NOT_A_SECRET_KEY,
    PLACEHOLDER_IN_URL,
    URL_PASSWORD,
    basic_credentials,
    looks_like_password,
    looks_secret,
    netrc_password,
    pgpass_line,
    user_and_password,
)


class SecretRule(NamedTuple):
    kind: str
    pattern: re.Pattern[str]
    # The rule runs only on a text that holds one of these (case-folded for a
    # case-insensitive pattern): a quick test that spares most texts most patterns.
    needles: tuple[str, ...]
    # A further test of each match, for the rules that need one.
    check: Callable[[re.Match[str]], bool] | None = None
    # For a rule of several formats, one group each (k0, k1, …): the kind of each.
    kinds: tuple[str, ...] = ()

    def kind_of(self, match: re.Match[str]) -> str:
        if not self.kinds or match.lastgroup is None:
            return self.kind
        return self.kinds[int(match.lastgroup[1:])]


RULES: list[SecretRule] = [
    SecretRule("Anthropic API key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,512}"), ("sk-ant-",)),
    SecretRule(
        "OpenAI API key",
        re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,512}"),
        ("sk-",),
    ),
    SecretRule(
        "AWS access key id",
        re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
        ("AKIA", "ASIA", "ABIA", "ACCA"),
    ),
    SecretRule(
        # Also the SecretAccessKey of the AWS CLI's and CloudFormation's YAML and JSON. A key
        # may end in "/" or "+", so the end is "no further key character", not \b.
        "AWS secret access key",
        re.compile(
            r"(?i)(?:aws[_-]?)?secret[_-]?access[_-]?key\W{0,4}[=:]\W{0,2}"
            r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])"
        ),
        ("access",),
    ),
    SecretRule(
        "GitHub token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{60,255})"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    SecretRule("GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,255}"), ("glpat-",)),
    SecretRule(
        "Slack token", re.compile(r"\b(?:xox[abposr]|xapp)-[A-Za-z0-9-]{10,255}"), ("xox", "xapp-")
    ),
    SecretRule(
        "Slack webhook",
        re.compile(
            r"https://hooks\.slack\.com/services/T[A-Za-z0-9_]{1,32}+/B[A-Za-z0-9_]{1,32}+/\w{1,64}"
        ),
        ("hooks.slack.com",),
    ),
    SecretRule("Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), ("AIza",)),
    SecretRule(
        "Stripe secret key",
        re.compile(r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{20,255}"),
        ("k_live_", "k_test_"),
    ),
    SecretRule("npm token", re.compile(r"\bnpm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"), ("npm_",)),
    SecretRule("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,255}"), ("hf_",)),
    SecretRule("SendGrid", re.compile(r"\bSG\.[\w-]{20,30}\.[\w-]{39,50}"), ("SG.",)),
    SecretRule(
        "Azure storage key",
        re.compile(r"(?i)\b(?:Account|SharedAccess)Key\s{0,3}=\s{0,3}[A-Za-z0-9+/]{40,128}={0,2}"),
        ("key",),
    ),
    SecretRule(
        "private key",
        re.compile(r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,5}PRIVATE KEY(?: BLOCK)?-----"),
        ("PRIVATE KEY",),
    ),
    # scheme://user:password@host, the user possibly empty — a password written into a URL
    # (not a placeholder, nor masked as *** or xxx).
    SecretRule(
        "password in a URL",
        URL_PASSWORD,
        ("://",),
        check=lambda match: not PLACEHOLDER_IN_URL.search(match.group()),
    ),
    SecretRule(
        "JSON web token",
        re.compile(
            r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{10,8192}+\.eyJ[A-Za-z0-9_-]{10,8192}+\.[\w-]{10,8192}"
        ),
        ("eyJ",),
    ),
    SecretRule(
        # With or without "Authorization:" before it (curl -H, a Postman note, prose).
        "bearer token",
        re.compile(r"(?i)\bbearer\s{1,5}(?P<value>[\w.~+/-]{16,}+=*)"),
        ("bearer",),
        check=lambda match: looks_secret(match["value"]),
    ),
    SecretRule(
        "basic auth credentials",
        re.compile(
            r"(?i)\bauthorization[\"']?\s{0,5}[:=]\s{0,5}[\"']?\s{0,3}basic\s{1,5}"
            r"(?P<value>[A-Za-z0-9+/]{8,4096}+={0,2})"
        ),
        ("basic",),
        check=lambda match: basic_credentials(match["value"]),
    ),
    SecretRule(
        "Twilio API key or account SID",
        re.compile(r"\b(?:SK|AC)[0-9a-f]{32}\b"),
        ("SK", "AC"),
    ),
    SecretRule(
        "Telegram bot token",
        re.compile(r"\b\d{8,10}:AA[\w-]{33}(?![\w-])"),
        (":AA",),
    ),
    SecretRule(
        # mysql -pS3cr3t (the password glued to -p; a bare -p asks for it), and the
        # other MySQL/MariaDB clients.
        "password on a command line",
        re.compile(
            r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb(?:-dump)?)\b"
            r"[^\n]{0,200}?[ \t]-p(?P<value>\"[^\"\n]++\"|'[^'\n]++'|[^\s\"'`]++)"
        ),
        ("mysql", "mariadb"),
        check=lambda match: looks_like_password(match["value"], short=True),
    ),
    SecretRule(
        # --password S3cr3t, --token=…, sshpass -p S3cr3t.
        "password on a command line",
        re.compile(
            r"(?i)(?<![\w-])(?:--(?:password|passwd|pass|pwd|api-?key|token|secret|auth-token"
            r"|access-token|client-secret)|sshpass[ \t]{1,5}-p)(?:=|[ \t]{1,5})"
            r"(?P<value>\"[^\"\n]++\"|'[^'\n]++'|[^\s\"'`]++)"
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
        check=lambda match: looks_like_password(match["value"], short=True),
    ),
    SecretRule(
        # curl -u user:password, wget --user, httpie -a.
        "password on a command line",
        re.compile(
            r"(?<![\w-])(?:-u|--user|-a|--auth)[ \t=]{1,5}[\"']?(?P<user>[^\s:\"'@/]{1,64}):"
            r"(?P<value>[^\s\"'@]{1,256})(?![^\s\"'])"
        ),
        ("-u ", "-u\t", "-u=", "--user", "-a ", "-a\t", "-a=", "--auth"),
        check=lambda match: user_and_password(match["user"], match["value"]),
    ),
    SecretRule(
        # ~/.netrc: machine HOST [login USER] [account ACCOUNT] password PASSWORD, on one line
        # or several; "default" for any host.
        "password",
        re.compile(
            r"(?i)\b(?:machine\s{1,5}(?P<host>\S{1,256})|default)"
            r"(?:\s{1,5}(?:login|account)\s{1,5}\S{1,256}){0,2}\s{1,5}password\s{1,5}(?P<value>\S++)"
        ),
        ("machine", "default"),
        check=lambda match: netrc_password(match["host"], match["value"]),
    ),
    SecretRule(
        # ~/.pgpass: hostname:port:database:username:password (":" and "\\" escaped by "\\"),
        # matched from the port on (a host before it is checked after: see pgpass_line). A
        # port has no leading zero and a database or user name no "&", "=" or "?": not a
        # time, nor a query string's values (?start=…T10:15:30Z&end=…T11:45:00Z).
        "password",
        re.compile(
            r":(?:[1-9]\d{0,4}|\*)(?::(?:[^\s:\\&=?]|\\.){1,63}+){2}"
            r":(?P<value>(?:[^\s:\\]|\\.)++)(?=[\s`'\")\]]|$)"
        ),
        (":",),
        check=pgpass_line,
    ),
    SecretRule(
        # docker login -p PASSWORD (and the tools that copy its options).
        "password on a command line",
        re.compile(
            r"\b(?:docker|podman|buildah|skopeo|nerdctl|oras|helm[ \t]{1,5}registry)"
            r"[ \t]{1,5}login\b"
            r"[^\n]{0,200}?[ \t]-p(?:=|[ \t]{1,5})"
            r"(?P<value>\"[^\"\n]++\"|'[^'\n]++'|[^\s\"'`]++)"
        ),
        (" login",),
        check=lambda match: looks_like_password(match["value"], short=True),
    ),
    SecretRule(
        # In prose: "my password is hunter2", "the admin password for staging is Sunfl0wer!",
        # "password was changed to S3cr3t!".
        "password",
        re.compile(
            r"(?i)\b(?:passw(?:or)?d|passphrase|passcode)s?\b"
            r"(?:[ \t]{1,3}(?:for|of|to|on|at)(?:[ \t]{1,3}[^\s:=]{1,40}){1,4}?)?"
            r"[ \t]{1,3}(?:is|was|are|were|is[ \t]now|set[ \t]to|changed[ \t]to|became|reads)"
            r"[ \t:]{1,3}[\"'`“‘]?(?P<value>[^\s\"'`”’]{4,}+)"
        ),
        ("passw", "passphrase", "passcode"),
        check=lambda match: looks_like_password(match["value"]),
    ),
    SecretRule(
        # In Chinese: 服务器的密码是 Qwer1234!, 数据库密码：Zx82kfP0q9, 口令为 …
        "password",
        re.compile(
            r"(?:密码|口令|密钥|令牌|暗码|通行码|秘钥)[^\s，。；,;:：=]{0,8}?(?:是|为|:|：|=)"
            r"[ \t]{0,3}[\"'“‘「]?(?P<value>[\x21-\x7e]{4,}+)"
        ),
        ("密码", "口令", "密钥", "令牌", "暗码", "通行码", "秘钥"),
        check=lambda match: looks_like_password(match["value"]),
    ),
]

# More vendors' tokens, each known by its prefix: (kind, prefix, the rest of the format).
VENDOR_TOKENS = [
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
# One pattern for all of them: one scan of a text that holds any prefix, not one a prefix.
RULES.append(
    SecretRule(
        "vendor token",
        re.compile(
            r"\b(?:"
            + "|".join(
                f"(?P<k{index}>{re.escape(prefix)}{rest})"
                for index, (_, prefix, rest) in enumerate(VENDOR_TOKENS)
            )
            + r")(?![\w-])"
        ),
        tuple(prefix for _, prefix, _ in VENDOR_TOKENS),
        kinds=tuple(kind for kind, _, _ in VENDOR_TOKENS),
    )
)
RULES.append(
    SecretRule(
        "Terraform Cloud token",
        re.compile(r"\b[A-Za-z0-9]{14}\.atlasv1\.[\w-]{60,128}(?![\w-])"),
        ("atlasv1",),
    )
)
RULES += [SecretRule(*rule) for rule in ENCODED_RULES]

# Rules that match a value of any shape after a word that names a secret, and the others.
GENERIC_KINDS = frozenset(
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
PREPARED = [
    (
        rule,
        bool(rule.pattern.flags & re.IGNORECASE),
        re.compile("|".join(re.escape(needle) for needle in rule.needles)),
    )
    for rule in RULES
]
PREPARED_FORMATS = [prepared for prepared in PREPARED if prepared[0].kind not in GENERIC_KINDS]

# The generic rule: KEY = value, or KEY: value, the key naming a secret. Reported only where
# no specific rule matched, so that the finding names the most precise kind.
ASSIGNMENT_KIND = "secret assignment"
ASSIGNMENT_NEEDLES = ("passw", "passphrase", "pwd", "secret", "token", "key")
_ASSIGNMENT = re.compile(
    r"(?<![\w.-])"
    # Atomic: every way of reading the key ends at the same ":" or "=", so when the value
    # fails after one, it fails after all.
    r"(?P<key>(?>[\w.-]{0,40}?"
    r"(?i:passw(?:or)?d|passphrase|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key)"
    r"(?:[_.-][\w.-]{0,30}+|[A-Z][\w.-]{0,30}+)?))"
    r"(?:[\"']\]?)?\s{0,5}[:=]\s{0,5}"
    # A value is matched up to 256 characters, which keeps a failed try short; a longer one
    # is read to its end after the match, once (_whole), so that it is judged whole.
    r"(?:(?P<quote>[\"'])(?P<quoted>[^\s\"'\\]{4,256}+)(?:(?P=quote)|(?=[^\s\"'\\]))"
    r"|(?P<bare>[^\s\"'`()\[\]{}<>,;]{4,256}+)(?=[\s,;\"'`)\]}]|$|[^\s\"'`()\[\]{}<>,;]))"
)
_QUOTED_REST = re.compile(r"[^\s\"'\\]*+")
_BARE_REST = re.compile(r"[^\s\"'`()\[\]{}<>,;]*+")
_BARE_END = re.compile(r"[\s,;\"'`)\]}]|\Z")
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


class Assignment(NamedTuple):
    """KEY = value as _ASSIGNMENT found it, the value whole."""

    start: int
    end: int
    key: str
    value: str


def credible_assignment(assignment: Assignment) -> bool:
    """Whether the value assigned is a secret: the key names the secret itself (not its
    file or its length), and the value is a password after a password's key, else one that
    looks secret, of at least 8 characters."""
    value = assignment.value
    if NOT_A_SECRET_KEY.search(assignment.key):
        return False
    if _PASSWORD_KEY.search(assignment.key):
        return looks_like_password(value, short=True) and len(value) >= 4
    return len(value) >= 8 and looks_secret(value)


def assignment_matches(text: str) -> Iterator[Assignment]:
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
            assignment, covered = _whole(match)
            if assignment is not None:
                yield assignment


def _whole(match: re.Match[str]) -> tuple[Assignment | None, int]:
    """The assignment with its value read to its end, or None when the longer value does not
    end as a value must (its closing quote; a space or punctuation); and where it ended, so
    that no key inside a long value is tried again."""
    text, key = match.string, match["key"]
    if match["quoted"] is not None:
        end = match.end("quoted")
        if match.end() > end:  # its closing quote: the value was whole
            return Assignment(match.start(), match.end(), key, match["quoted"]), match.end()
        end = _QUOTED_REST.match(text, end).end()  # type: ignore[union-attr]
        if not text.startswith(match["quote"], end):
            return None, end
        return Assignment(match.start(), end + 1, key, text[match.start("quoted") : end]), end + 1
    end = _BARE_REST.match(text, match.end()).end()  # type: ignore[union-attr]
    if end > match.end() and _BARE_END.match(text, end) is None:
        return None, end
    return Assignment(match.start(), end, key, text[match.start("bare") : end]), end
