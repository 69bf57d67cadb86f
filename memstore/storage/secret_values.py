"""Whether a value a secret rule matched is a secret: not a placeholder (`${VAR}`,
`<your-key>`, `xxxx`, `changeme`), not a word, a name, a number, a version, a path or a URL,
and, after a word that says "password", long enough to be one (see memstore.storage.secrets);
in a file made for passwords (.netrc, .pgpass), a word too.
"""

from __future__ import annotations

import base64
import binascii
import re

# A value that stands for a secret rather than being one.
_PLACEHOLDER_VALUE = re.compile(
    r"""(?ix)^(?:
        \$.*                                # $VAR, ${VAR}, $(command)
      | <.*> | \{\{.*\}\}? | \{\w*\} | %\(?\w*\)?s  # <your-key>, {{ var }}, {var}, %s
      | (?:x{3,}|\*{3,}|•{3,}).* | .*(?:…|\.\.\.).*  # xxxx, ****, elided: sk-ant-…
      | (.)\1*                              # one character repeated: ########
      | .*(?:change[_-]?me|replace[_-]?me|your[_-]|example|placeholder|dummy|redacted
             |insert[_-]|fill[_-]?in|todo|fixme).*
      | (?:my|your)[_-]?(?:pass\w*|pwd|secret\w*|token\w*|key)  # the docs' mypassword
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
NOT_A_SECRET_KEY = re.compile(
    r"""(?ix)(?:name|ref|file|path|dir|url|uri|endpoint|type|kind|len|length|count|size|ttl
        |expiry|expires|expires_at|expires_in|version|field|header|prefix|env|var|id|arn
        |policy|provider|format|mode|pattern|hash|limit|max|min|timeout|enabled|required
        |rotation)s?$"""
)


def looks_secret(value: str) -> bool:
    return not _PLACEHOLDER_VALUE.match(value) and not _NOT_A_SECRET_VALUE.match(value)


_TRAILING_PUNCTUATION = ".,;:!?)]}>。，；：！？）"
# A password of digits only is a password when it is long enough to be one (a PIN, a
# phone-style password), not a count or a year.
_DIGITS_PASSWORD = re.compile(r"\d{6,}")


def looks_like_password(value: str, *, short: bool = False) -> bool:
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
    return looks_secret(value) or bool(_DIGITS_PASSWORD.fullmatch(value))


def plain_password(value: str) -> bool:
    """A value where a file's own syntax says a password goes (.netrc, .pgpass): a word of
    letters counts too; a placeholder or a number of fewer than 6 digits does not."""
    if value[:1] in "\"'" and value[-1:] == value[:1] and len(value) >= 2:
        value = value[1:-1]
    if not value or _PLACEHOLDER_VALUE.match(value):
        return False
    return not _NUMBER.fullmatch(value) or bool(_DIGITS_PASSWORD.fullmatch(value))


_NUMBER = re.compile(r"[\d.:-]*")


def netrc_password(host: str | None, value: str) -> bool:
    """A .netrc line's password: any word when its machine is a host's name with a dot
    (api.github.com) or localhost; else (`default`, a machine that is one word) a value that
    looks like a password, as prose can read "machine learning login page password reset"."""
    if host is not None and ("." in host or host.lower() == "localhost"):
        return plain_password(value)
    return looks_like_password(value, short=True)


def user_and_password(user: str, password: str) -> bool:
    """user:password, unless it is the documentation's user:pass or a placeholder."""
    if user.lower() in ("user", "username", "login", "name") and password.lower() in (
        "pass",
        "password",
        "passwd",
    ):
        return False
    return looks_like_password(password, short=True)


def basic_credentials(value: str) -> bool:
    """Base64 of user:password (RFC 7617), unless a documentation placeholder."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon) and user_and_password(user, password)


# scheme://user:password@host, the user possibly empty: a password written into a URL (not
# masked as *** or xxx). The password is read whole, however long: the classes stop at the
# next "/" or "@", so the scan stays linear.
URL_PASSWORD = re.compile(
    r"\b[a-zA-Z][a-zA-Z0-9+.-]{0,30}+://[^\s:/?#@]{0,256}+:(?![*x]{1,256}+@)"
    r"[^\s/?#@]++@[\w.-]{1,256}"
)
# A password in a URL that is plainly a placeholder is not a secret.
PLACEHOLDER_IN_URL = re.compile(
    r"(?i)://[^\s:/@]{0,256}:(?:password|passwd|secret|changeme|your[\w-]{0,64}|<[^>]{0,256}>"
    r"|\$\{?\w{1,256}\}?|\{\{?[^}]{0,256}\}\}?|%s|%\(\w{1,64}\)s|\.\.\.|…)@"
    r"|://(?:user|username|login):pass@"  # user:pass, the documentation's idiom
)


# A .pgpass line's host, just before its ":port": a name or an address (a letter or a dot
# in it: not a number, nor a time as in 12:30:45:…) or "*", at the start of a word (so that a
# longer run of fields, as in /etc/passwd, is not one).
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_HOST_MAX_CHARS = 253


def pgpass_line(match: re.Match[str]) -> bool:
    """A .pgpass line, matched from its ":port": a host just before it, and a password."""
    text, end = match.string, match.start()
    if text[end - 1 : end] == "*":
        start = end - 1
    else:
        start = end
        while start > 0 and end - start < _HOST_MAX_CHARS and text[start - 1] in _HOST_CHARS:
            start -= 1
        if not any(c.isalpha() or c == "." for c in text[start:end]):
            return False
    if start > 0 and (text[start - 1] in _HOST_CHARS or text[start - 1] in "*:\\"):
        return False
    return plain_password(match["value"])
