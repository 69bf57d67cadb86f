"""The rules of the secret check (memstore.storage.secrets) for secrets that show only once
decoded: a private key in base64 (a PEM file as Kubernetes stores it in a Secret), a key's body
without its BEGIN line (its DER, or OpenSSH's own format, in base64), an Azure SAS's signature,
and a URL with a password, percent-encoded (a query parameter, a redirect).

Each is found by a cheap shape first (a base64 run that starts as the format's header does, a
`sig=`, a `%3A%2F%2F`), then decoded and checked: only what decodes to the secret's own format
counts, so a certificate, a public key or base64 of anything else passes.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import NamedTuple
from urllib.parse import unquote

from memstore.storage.secret_values import PLACEHOLDER_IN_URL, URL_PASSWORD


class EncodedRule(NamedTuple):
    """A rule as secret_rules.SecretRule has it (kind, pattern, needles, check)."""

    kind: str
    pattern: re.Pattern[str]
    needles: tuple[str, ...]
    check: Callable[[re.Match[str]], bool] | None


_PRIVATE_KEY_LINE = re.compile(r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,5}PRIVATE KEY")
# Enough base64 to decode a BEGIN line ("-----BEGIN ENCRYPTED PRIVATE KEY-----", with room)
# or the first bytes of a DER structure.
_HEAD_CHARS = 80


def _decoded_head(text: str) -> bytes:
    """The bytes the first characters of a base64 run decode to (b"" if none)."""
    head = text[:_HEAD_CHARS]
    head = head[: len(head) - len(head) % 4]
    try:
        return base64.b64decode(head, validate=True)
    except (binascii.Error, ValueError):
        return b""


def pem_private_key(match: re.Match[str]) -> bool:
    """Base64 of a PEM file whose BEGIN line says PRIVATE KEY (not CERTIFICATE, PUBLIC KEY)."""
    return bool(_PRIVATE_KEY_LINE.match(_decoded_head(match.group()).decode("latin-1")))


# A private key's DER starts SEQUENCE, INTEGER version (0 or 1; 3 for a PKCS#12 file, which
# holds keys), then the key: an INTEGER (PKCS#1 RSA, DSA), a SEQUENCE (PKCS#8's algorithm, a
# PKCS#12's content) or an OCTET STRING (SEC1 EC). Certificates and public keys start
# SEQUENCE, SEQUENCE: no version first.
_VERSIONS = (0, 1, 3)
_KEY_TAGS = (0x02, 0x30, 0x04)


def der_private_key(match: re.Match[str]) -> bool:
    data = _decoded_head(match.group())
    if len(data) < 8 or data[0] != 0x30:
        return False
    length = data[1]
    at = 2 if length < 0x80 else 2 + (length - 0x80)
    if length == 0x80 or at > 5:  # indefinite length, or longer than a key can be
        return False
    version = data[at : at + 4]
    return (
        len(version) == 4
        and version[:2] == b"\x02\x01"
        and version[2] in _VERSIONS
        and version[3] in _KEY_TAGS
    )


# An Azure SAS's sig= is an HMAC-SHA256: 32 bytes, in base64, percent-encoded in a URL.
_SIGNATURE_BYTES = 32


def sas_signature(match: re.Match[str]) -> bool:
    try:
        decoded = base64.b64decode(unquote(match["value"]), validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(decoded) == _SIGNATURE_BYTES


# How far before its "://" a percent-encoded URL's scheme may start.
_SCHEME_CHARS = 40


def encoded_url_password(match: re.Match[str]) -> bool:
    """A percent-encoded URL that, decoded, holds a password (not a placeholder)."""
    decoded = unquote(match.string[max(0, match.start() - _SCHEME_CHARS) : match.end()])
    return any(
        not PLACEHOLDER_IN_URL.search(found.group()) for found in URL_PASSWORD.finditer(decoded)
    )


_BASE64 = "[A-Za-z0-9+/]"
ENCODED_RULES = [
    EncodedRule(
        "private key",
        # "-----BEGIN" in base64: a PEM file as Kubernetes (or an .env) keeps it.
        re.compile(rf"LS0tLS1CRUdJTi{_BASE64}{{20,}}+"),
        ("LS0tLS1CRUdJTi",),
        pem_private_key,
    ),
    EncodedRule(
        "private key",
        # A DER SEQUENCE in base64 starts with "M"; 64 characters is one line of a PEM body
        # (and a whole Ed25519 key). The look-behind keeps to the start of a base64 run.
        re.compile(rf"M(?<!{_BASE64}M){_BASE64}{{63}}"),
        ("M",),
        der_private_key,
    ),
    EncodedRule(
        "private key",
        # "openssh-key-v1" in base64: the body of an OpenSSH private key (public keys are
        # "AAAA…").
        re.compile(rf"b(?<!{_BASE64}b)3BlbnNzaC1rZXktdjE{_BASE64}{{20,}}+"),
        ("b3BlbnNzaC1rZXktdjE",),
        None,
    ),
    EncodedRule(
        "Azure SAS signature",
        re.compile(r"(?i)[?&;]sig=(?P<value>[A-Za-z0-9%+/=]{40,128}+)(?![A-Za-z0-9%+/=])"),
        ("sig=",),
        sas_signature,
    ),
    EncodedRule(
        "password in a URL",
        re.compile(r"(?i)%3A%2F%2F[^\s\"'<>`&]++"),
        ("%3a%2f%2f",),
        encoded_url_password,
    ),
]
