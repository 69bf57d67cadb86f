"""The deterministic secrets scanner: credentials it must catch, ordinary text it must leave
alone, and hostile input it must get through quickly."""

from __future__ import annotations

import time

import pytest

from memstore import secrets
from memstore.secrets import find_secrets

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def kinds(text: str) -> list[str]:
    return [finding.kind for finding in find_secrets(text)]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        # Passwords in URLs: an empty user, and short passwords.
        ("redis://:pass@cache.internal:6379/0", "password in a URL"),
        ("REDIS_URL=redis://:s3cr3t@10.0.0.5:6379", "password in a URL"),
        ("postgres://app:pw@db:5432/app", "password in a URL"),
        ("mysql://root:7@localhost/db", "password in a URL"),
        ("amqp://guest:Zq@rabbit//", "password in a URL"),
        # Assignments of a secret-looking name.
        ("DB_PASSWORD=s3cr3tvalue", "secret assignment"),
        ('password: "hunter2hunter2"', "secret assignment"),
        ("password: hunter2hunter2", "secret assignment"),
        ('api_key = "9f8a7b6c5d4e3f2a1b0c"', "secret assignment"),
        ("SECRET_KEY=django-insecure-4x9#k2m!p7q", "secret assignment"),
        ('{"client_secret": "aB3dE5fG7hJ9kL1m"}', "secret assignment"),
        ("export GITHUB_TOKEN='t0k3n-Value-123'", "secret assignment"),
        ("db.passwd: Tr0ub4dor&3", "secret assignment"),
        ("apiKey: 'Xy7Zq2Lm9Pw4Rt6V'", "secret assignment"),
        ("PRIVATE_KEY=MIIEvQIBADANBgkqhkiG9w0B", "secret assignment"),
        ("ACCESS_KEY: Q2hhbmdlZDEyMzQ1Ng", "secret assignment"),
        ("https://api.example.org/v1/items?access_token=a1b2c3d4e5f6&page=2", "secret assignment"),
        # Bearer tokens.
        ("Authorization: Bearer abcdef0123456789abcdef", "bearer token"),
        ('curl -H "authorization: bearer 3f9a8b7c6d5e4f3a2b1c0d9e"', "bearer token"),
        # AWS: a secret key ending in "/" or "+", and the CLI's YAML/JSON spelling.
        (f"aws_secret_access_key = {AWS_SECRET[:-1]}/", "AWS secret access key"),
        (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET[:-1]}+", "AWS secret access key"),
        (f"SecretAccessKey: {AWS_SECRET}", "AWS secret access key"),
        (f'"SecretAccessKey": "{AWS_SECRET[:-1]}/"', "AWS secret access key"),
        # Vendor formats.
        ("xapp-1-A0123456789-1234567890123-abcdef0123456789", "Slack token"),
        ("sk_test_" + "4eC39HqLyjWDarjtT1zdp7dc", "Stripe secret key"),
        ("rk_test_" + "51H8a9bC0dE1fG2hI3jK4lM5n", "Stripe secret key"),
        ("sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "Stripe secret key"),
        ("//registry.npmjs.org/:_authToken=npm_" + "a1B2c3D4e5" * 3 + "F6g7H8", "npm token"),
        ("hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ1234", "Hugging Face token"),
        ("SG." + "aBcDeFgHiJkLmNoPqRsTuV" + "." + "a1B2c3D4e5F6g7H8i9J0k" * 2 + "L", "SendGrid"),
        (
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey="
            + "a1B2c3D4e5F6g7H8i9J0" * 4
            + "k1L2m3N4==;EndpointSuffix=core.windows.net",
            "Azure storage key",
        ),
        # The formats caught before stay caught.
        ("sk-ant-api03-" + "A1b2C3d4E5" * 8, "Anthropic API key"),
        ("AKIAIOSFODNN7EXAMPLE", "AWS access key id"),
        ("ghp_" + "a1B2c3D4e5" * 4, "GitHub token"),
        ("xoxb-123456789012-abcdefghijkl", "Slack token"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----", "private key"),
        ("postgres://admin:hunter2secret@db.internal:5432/app", "password in a URL"),
    ],
)
def test_secrets_are_found(text: str, kind: str) -> None:
    found = find_secrets(f"config:\n  {text}\nend")
    assert found and found[0].kind == kind, found
    assert len(found[0].preview) <= 7  # masked: six characters at most, then "…"


@pytest.mark.parametrize(
    "text",
    [
        "the token count is 5",
        "token_count: 12",
        "max_tokens=4096",
        "tokenizer: bert-base-uncased",
        "the password reset flow sends a mail",
        "Password: see the team vault",
        "Secret: configuration-dependent behaviour",
        "Token: Übersicht-der-Schlüssel",
        "Task sk-learn is unrelated; so is sk-12.",
        "api_key = os.environ['API_KEY']",
        'api_key = os.environ.get("API_KEY")',
        "password = get_password(user)",
        "token = self.token",
        "secret_key: SecretStr",
        "def login(password: str, token: Optional[str] = None) -> None:",
        "password_hash = hash(password)",
        "password: ${DB_PASSWORD}",
        "DB_PASSWORD=$DB_PASSWORD",
        "API_KEY=<your-api-key>",
        "API_KEY=your-api-key-here",
        "SECRET_KEY=changeme",
        "SECRET_KEY=changeme123",
        "password: '********'",
        "token: xxxxxxxxxxxxxxxx",
        'api_key = "example-key-1234"',
        "password = {{ vault_db_password }}",
        "token_expires_at: 2024-01-01T00:00:00Z",
        "Authorization: Bearer $TOKEN",
        "Authorization: Bearer <token>",
        "Authorization: Bearer YOUR_ACCESS_TOKEN_HERE",
        "postgres://app:${DB_PASSWORD}@db:5432/app",
        "postgres://user:password@localhost/db",
        "https://user:<password>@example.com",
        "redis://:@localhost:6379",
        "https://user:pass@host:8000/path?query#fragment",
        "ANTHROPIC_API_KEY=sk-ant-…  # or sk-ant-... in the docs",
        'token.markup = "########"[:level]',
        "ssh://git@github.com/org/repo.git and git@github.com:org/repo.git",
        "http://localhost:8080/path?x=1",
        "AccountKey=<your-account-key>",
        "SG.example.com is a domain",
        "hf_hub_download(repo_id='gpt2')",
        "npm_config_cache=/tmp/npm",
        "see the sk_test_ prefix in the Stripe docs",
    ],
)
def test_ordinary_text_is_not_a_secret(text: str) -> None:
    assert find_secrets(text) == []


def test_findings_are_in_order_with_their_offsets() -> None:
    text = "a ghp_" + "a1B2c3D4e5" * 4 + " then DB_PASSWORD=s3cr3tvalue"
    found = find_secrets(text)
    assert [f.kind for f in found] == ["GitHub token", "secret assignment"]
    assert found[0].offset == 2 and found[1].offset == text.index("DB_PASSWORD")
    # A specific rule wins over the generic one for the same span: reported once.
    assert kinds(f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}") == ["AWS secret access key"]


ADVERSARIAL = [
    "a." * 100_000,
    "eyJa." * 40_000,
    "eyJ" + "a" * 200_000,
    ("eyJ" + "a" * 20 + ".") * 8_000,
    "a:" * 100_000,
    "a://" * 50_000,
    "a://b:" * 33_000,
    "x://" + "a:" * 100_000,
    "://:" * 50_000,
    "@" * 200_000,
    "a" * 200_000,
    "-" * 200_000,
    "password=" * 22_000,
    "password" * 25_000,
    "password:" + "a" * 200_000,
    "api_key-" * 25_000,
    "_-." * 66_000,
    "-----BEGIN " + "A " * 100_000,
    "Authorization: Bearer " * 9_000,
    "Bearer " * 28_000,
    "sk-" * 66_000,
    "xoxb-" * 40_000,
    "AccountKey=" * 18_000,
    "aws_secret_access_key=" * 9_000,
    "SG." * 66_000,
    "https://hooks.slack.com/services/T" + "a" * 200_000,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda text: repr(text[:16]))
def test_adversarial_input_is_scanned_quickly(text: str) -> None:
    assert len(text) >= 190_000
    # Every rule's trigger, so that every rule scans the whole text.
    text += " sk-ant- :// eyJ Bearer passw secret token key access AKIA ghp_ glpat- xox xapp-"
    text += " hooks.slack.com AIza k_live_ npm_ hf_ SG. PRIVATE KEY"
    started = time.perf_counter()
    find_secrets(text)
    assert time.perf_counter() - started < 1.0


def test_only_the_first_megabyte_is_scanned() -> None:
    secret = "ghp_" + "a1B2c3D4e5" * 4
    inside = " " * (secrets.SCAN_MAX_CHARS - 100) + secret
    assert kinds(inside) == ["GitHub token"]
    beyond = " " * secrets.SCAN_MAX_CHARS + secret
    assert find_secrets(beyond) == []
