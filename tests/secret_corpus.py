"""The corpus of the secret check (memstore.storage.secrets): credentials it must catch and
look-alikes it must let through. Its tests (test_secrets.py, test_secret_doors.py) and
benchmarks/bench_secrets.py, which runs detect-secrets on the same cases, all read it.

- CREDENTIALS and LOOK_ALIKES: the tables the check was first written against.
- SHAPES and SHAPE_LOOK_ALIKES: the shapes of issue 28 (.netrc, .pgpass, docker login -p, an
  Azure SAS, a key in base64 or without its BEGIN line, a URL percent-encoded, long values),
  and text near them that is no secret: the rules for those shapes were tuned on these.
- HELD_OUT_SHAPES and HELD_OUT_LOOK_ALIKES: written with them, before those rules, from the
  formats' documentation, and never tuned on: a rule is kept only if it helps there too.

No real key is here: the keys are their formats' headers (DER, PEM, OpenSSH) around bytes
made from a hash, so that nothing in this file opens anything.
"""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import quote


def _bytes(seed: str, count: int) -> bytes:
    """`count` bytes that look random, the same on every run."""
    out = b""
    while len(out) < count:
        out += hashlib.sha256(f"{seed}{len(out)}".encode()).digest()
    return out[:count]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _wrapped(text: str, width: int = 64) -> str:
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


def _der(head: str, size: int, seed: str) -> bytes:
    """A DER structure: its first bytes `head` (hex), the rest made up, `size` bytes in all."""
    start = bytes.fromhex(head)
    return start + _bytes(seed, size - len(start))


# The DER of private keys: PKCS#1 RSA (SEQUENCE, version 0, the modulus), PKCS#8 (SEQUENCE,
# version 0, the algorithm, the key as an OCTET STRING), SEC1 EC (version 1, the key).
RSA_DER = _der("308204a4020100028201010000", 1192, "rsa")
PKCS8_DER = _der("308204bd020100300d06092a864886f70d0101010500048204a7308204a3020100", 1217, "p8")
EC_DER = _der("30770201010420", 121, "ec")
ED25519_DER = bytes.fromhex("302e020100300506032b657004220420") + _bytes("ed", 32)
OPENSSH_KEY = b"openssh-key-v1\x00\x00\x00\x00\x04none\x00\x00\x00\x04none" + _bytes("ssh", 300)
# What is public: a certificate, a public key (SubjectPublicKeyInfo), an SSH public key.
CERTIFICATE_DER = _der("3082035d30820245a003020102020900", 865, "cert")
PUBLIC_KEY_DER = _der(
    "30820122300d06092a864886f70d01010105000382010f003082010a0282010100", 294, "pub"
)
SSH_PUBLIC = "AAAAC3NzaC1lZDI1NTE5AAAAI" + _b64(_bytes("sshpub", 32))[:43]


def pem(label: str, der: bytes) -> str:
    return f"-----BEGIN {label}-----\n{_wrapped(_b64(der))}\n-----END {label}-----\n"


def sas_signature(seed: str) -> str:
    """An Azure SAS's sig=: an HMAC-SHA256 in base64, percent-encoded as in a URL."""
    return quote(_b64(hashlib.sha256(seed.encode()).digest()), safe="")


def _long(seed: str, count: int) -> str:
    """`count` characters of a generated secret: letters and digits."""
    return _b64(_bytes(seed, count)).replace("+", "").replace("/", "")[:count]


ZW = "\u200b"  # a zero-width space
# Written from the credential formats (vendor prefixes and lengths, where people write
# passwords), not fitted to the scanner.
CREDENTIALS = [
    ("AWS access key id", "the deploy user's key is AKIA2E0A8F3B244C9986"),
    ("AWS secret", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Ld4Kp2v"),
    ("URL password", "connect with https://admin:hunter2@db.example.com/app"),
    ("GitHub classic", "token ghp_" + "x7Kq2mP9vR4sT1wY6zB3nC8dF5gH0jL2aE4i"),
    ("GitHub fine-grained", "github_pat_11ABCDEFG0" + "a1B2c3D4e5" * 7 + "x1"),
    ("GitLab", "use glpat-Zx8vK2mQ9pR4sT1wY6zB for the registry"),
    ("Slack bot", "SLACK=xoxb-2948172635-5829301746-aBcDeFgHiJkLmNoPqRsTuVwX"),
    (
        "Slack webhook",
        "alerts go to https://hooks.slack.com/services/T024BE7LD/B01ABCDEF12/Xk9pQ2mR8sT4vW6yZ1aB3cD5",
    ),
    ("Google API key", "maps key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
    ("Stripe live", "billing uses sk_live_51H8a9bC0dE1fG2hI3jK4lM5nOp"),
    ("Stripe restricted", "rk_live_51H8a9bC0dE1fG2hI3jK4lM5nOp"),
    ("Anthropic", "ANTHROPIC_API_KEY=sk-ant-api03-" + "Xk9pQ2mR8s" * 9 + "AA"),
    ("OpenAI project", "OPENAI_API_KEY=sk-proj-" + "Zq8vK2mQ9pR4sT1w" * 3),
    ("npm", "//registry.npmjs.org/:_authToken=npm_" + "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY1z2A"),
    ("Hugging Face", "HF_TOKEN hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ123456"),
    ("SendGrid", "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"),
    (
        "private key",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgH\n"
        "-----END RSA PRIVATE KEY-----",
    ),
    (
        "JWT",
        "session eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0"
        ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    ("Bearer", "curl -H 'Authorization: Bearer 8f3a2b1c9d7e6f5a4b3c2d1e0f9a8b7c'"),
    ("Basic", "Authorization: Basic " + base64.b64encode(b"deploy:Tr0ub4dor&3").decode()),
    ("prose password", "my password is hunter2"),
    ("prose admin", "the admin password is Sunflower!2024"),
    ("Chinese 1", "服务器的密码是 Qwer1234!"),
    ("Chinese 2", "数据库密码：Zx82kfP0q9"),
    ("short after password:", "password: hunter2"),
    ("mysql -p", "mysql -u root -pS3cr3tP4ss! app"),
    ("Twilio API key", "twilio key SK2b1c9d7e6f5a4b3c2d1e0f9a8b7c6d5e"),
    ("Twilio auth token", "TWILIO_AUTH_TOKEN=9d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a"),
    ("env assignment", "DB_PASSWORD=s3cr3tvalue"),
    ("curl -u", "curl -u deploy:Zk39!dq https://ci.example.com/api"),
    ("PGPASSWORD", "PGPASSWORD=pgPass42 psql -h db -U app"),
    ("netrc", "machine api.heroku.com login me@example.com password 5e8f3a21c9"),
    ("connection string", "Server=db;Database=app;User Id=sa;Password=Pa55w0rd!;"),
    (
        "PyPI",
        "pypi-AgEIcHlwaS5vcmc" + "CJGQ2ZTk5YWQtYTc4Ny00ZjJjLWE3NmQtN2M4YzQ1ZjBhYzY4AAIqWzMsImE",
    ),
    ("Telegram", "bot 7123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0"),
    ("DigitalOcean", "dop_v1_" + "4b3c2d1e0f9a8b7c" * 4),
    ("fullwidth GitHub", "ｇｈｐ＿" + "x7Kq2mP9vR4sT1wY6zB3nC8dF5gH0jL2aE4i"),
    ("zero-width GitHub", "gh" + ZW + "p_x7Kq2mP9vR4sT1" + ZW + "wY6zB3nC8dF5gH0jL2aE4i"),
    ("--password", "run ./deploy --password S3cr3t!x"),
    ("docker login", "docker login -u me --password dckr_pat_2b1c9d7e6f5a4b3c2d1e0f9a8b7"),
    ("digits password", "the wifi password is 84721936"),
    ("Google OAuth secret", "client secret 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"),
]
# Text a coding agent's memories hold every day that merely resembles a credential.
LOOK_ALIKES = [
    "Fixed in 3f786850e387550fdab836ed7e6dc881de23001b",
    "https://github.com/org/repo/commit/3f786850e387550fdab836ed7e6dc881de23001b",
    "git checkout 9fceb02 before bisecting",
    "request id 123e4567-e89b-12d3-a456-426614174000 in the logs",
    "![dot](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==)",
    "keep the token budget under 4096 tokens per turn",
    "password policy: at least 12 characters, rotated every 90 days",
    "ANTHROPIC_API_KEY=sk-... goes in your shell profile",
    "password: ${DB_PASSWORD}",
    "Authorization: Bearer <your-token>",
    "lodash-4.17.21.tgz integrity sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVj"
    "cXPs17LhbZVGedAJv8XZ1tvj5FvSg==",
    'hash = "sha256:0b1e6f1b1e2b0c5d9c8f3f2b4f2f9c1a6c2b6c4a4c1e9f8e7d6c5b4a3f2e1d0c"',
    "image digest sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "the password reset flow sends a mail",
    "Secret management: we use Vault; never commit .env files",
    "export DB_PASSWORD=$(vault kv get -field=password secret/db)",
    "mysql -u root -p app  (it prompts for the password)",
    'curl -u "$CI_USER:$CI_TOKEN" https://ci.example.com/api',
    "the password is stored in the team vault",
    "密码长度至少 12 位，包含大小写字母",
    "密码是必填项，不能为空",
    "max_tokens=4096 and temperature=0.2",
    "tokenizer: bert-base-uncased",
    "password_min_length: 12",
    "API_KEY=<your-api-key>",
    "postgres://user:password@localhost/db",
    "Bearer token authentication is configured in auth.py",
    "AKIA prefixes mark AWS access key ids",
    "secret_key: SecretStr",
    "Use --password-file /run/secrets/db rather than passing it inline",
    "The Twilio account id lives in settings.TWILIO_ACCOUNT_SID",
    "Run gpg --list-secret-keys to see them",
    "Authorization: Basic <credentials>",
    "the token expires after 3600 seconds",
    "session_token_ttl: 900",
    "release 2.14.0-rc.1+build.5 is on PyPI",
    "api_key = os.environ['API_KEY']",
    "SECRET_KEY=changeme",
    "password: '********'",
    "see the sk_test_ prefix in the Stripe docs",
]


SAS_QUERY = (
    "sv=2022-11-02&ss=b&srt=o&sp=r&se=2026-12-31T23:59:59Z&st=2026-01-01T00:00:00Z&spr=https"
)
# Issue 28's shapes: each stored through every door before the rules for them.
SHAPES = [
    (".netrc, letters-only password", "machine github.com login deploy password hunterhunter"),
    (".pgpass line", "db.internal:5432:app:deploy:S3cr3tPass"),
    ("docker login -p", "docker login -u deploy -p Dk9x2Lm7Qp registry.example.com"),
    (
        "Azure SAS URL",
        "https://acct.blob.core.windows.net/backups/db.bak?"
        + SAS_QUERY
        + "&sig="
        + sas_signature("one"),
    ),
    (
        "PEM key in base64 (Kubernetes)",
        "data:\n  tls.key: " + _b64(pem("RSA PRIVATE KEY", RSA_DER).encode()),
    ),
    ("key body without BEGIN", _wrapped(_b64(RSA_DER))[:400]),
    (
        "URL-encoded database URL",
        "DATABASE_URL=postgresql%3A%2F%2Fapp%3AS3cr3t99%40db.internal%3A5432%2Fapp",
    ),
    ("300-character DB_PASSWORD", "DB_PASSWORD=" + _long("db", 300)),
    ("400-character SECRET_KEY", 'SECRET_KEY="' + _long("sk", 400) + '"'),
    ("260-character client_secret", '{"client_secret": "' + _long("cs", 260) + '"}'),
]
# Text near those shapes that holds no secret.
SHAPE_LOOK_ALIKES = [
    "Put your credentials in ~/.netrc (machine, login and password lines) so curl -n finds them",
    "Our machine learning login page password reset is broken",
    "machine api.example.com login USERNAME password PASSWORD",
    ".pgpass lines read hostname:port:database:username:password",
    "https://api.example.com/v1/usage?start=2026-01-01T10:15:30Z&end=2026-01-02T11:45:00Z",
    "localhost:5432:mydb:myuser:mypassword",
    "docker login -p is deprecated: use --password-stdin",
    "docker run -p 8080:80 -p 5432:5432 nginx",
    "docker login registry.example.com -u deploy --password-stdin < token.txt",
    "SAS URLs end in &sig=<signature>; never paste one here",
    "the signature (sig=) of a SAS is an HMAC-SHA256 in base64, see the Azure docs",
    "ca.crt: " + _b64(pem("CERTIFICATE", CERTIFICATE_DER).encode()),
    "certificate body:\n" + _wrapped(_b64(CERTIFICATE_DER))[:400],
    "public key:\n" + _wrapped(_b64(PUBLIC_KEY_DER))[:400],
    "config.json: " + _b64(b'{"log_level": "debug", "replicas": 3, "region": "eu-west-1"}'),
    "redirect_uri=https%3A%2F%2Fapp.example.com%2Fcallback%3Fnext%3D%252Fhome",
    "url=postgres%3A%2F%2Fuser%3Apassword%40localhost%2Fdb",
    "SECRET_KEY_FILE=/run/secrets/" + "a/" * 150 + "key",
    'API_KEY="' + "x" * 300 + '"',
]
# Written with SHAPES, before the rules for them, and never tuned on.
HELD_OUT_SHAPES = [
    (
        ".netrc on three lines",
        "~/.netrc:\nmachine gitlab.example.com\n  login ci-bot\n  password qwertyuiopasdf",
    ),
    ("netrc default", "default login deploy password correcthorsebattery"),
    (".pgpass, wildcards", "*:*:*:postgres:Tr0ub4dor"),
    (".pgpass, letters only", "localhost:5432:orders:orders_rw:bluebirdsinging"),
    ("podman login -p", "podman login quay.io -u robot -p 'N8v!q2Xr4Lz'"),
    (
        "docker login, -p first",
        "docker login -p Xk29vLq81pZ -u gitlab-ci-token registry.gitlab.com",
    ),
    (
        "SAS connection string",
        "BlobEndpoint=https://acct.blob.core.windows.net/;SharedAccessSignature="
        + SAS_QUERY
        + "&sig="
        + sas_signature("two"),
    ),
    ("SAS token alone", "AZURE_SAS=?" + SAS_QUERY + "&sig=" + sas_signature("three")),
    ("EC key in base64 (Kubernetes)", "ssh-key: " + _b64(pem("EC PRIVATE KEY", EC_DER).encode())),
    (
        "OpenSSH key in base64 (Kubernetes)",
        "ssh-privatekey: " + _b64(pem("OPENSSH PRIVATE KEY", OPENSSH_KEY).encode()),
    ),
    ("PKCS#8 body without BEGIN", "key:\n" + _wrapped(_b64(PKCS8_DER))[:300]),
    ("EC body without BEGIN", _b64(EC_DER)),
    ("Ed25519 body without BEGIN", "signing key " + _b64(ED25519_DER)),
    ("OpenSSH body without BEGIN", _wrapped(_b64(OPENSSH_KEY))[:260]),
    (
        "URL-encoded MongoDB URL",
        "https://app.example.com/setup?conn=mongodb%2Bsrv%3A%2F%2Fadmin%3Ahunter2x%40cluster0.mongodb.net",
    ),
    (
        "double URL-encoded Redis URL",
        "REDIS=redis%253A%252F%252F%253Ap4ssw0rd77%2540cache%253A6379",
    ),
    ("500-character API token", "export API_TOKEN=" + _long("api", 500)),
    ("300-character YAML password", "password: '" + _long("yaml", 300) + "'"),
    ("300-character --password", "deploy --password " + _long("cli", 300)),
    ("300-character URL password", "postgres://app:" + _long("url", 300) + "@db.internal/app"),
]
HELD_OUT_LOOK_ALIKES = [
    "machine vision login screen password prompt",
    ".netrc format: machine <host> login <user> password <token>",
    "machine api.github.com login octocat password TOKEN",
    "hostname:5432:database:username:password",
    "docker login ghcr.io -u USERNAME -p $CR_PAT",
    "docker run --rm -p 5432:5432 -e POSTGRES_PASSWORD_FILE=/run/secrets/pg postgres",
    "Generate the SAS with az storage blob generate-sas; it starts with se= and ends with sig=…",
    "ca.crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t (a certificate, public)",
    "pub.pem: " + _b64(pem("PUBLIC KEY", PUBLIC_KEY_DER).encode()),
    "ssh-ed25519 " + SSH_PUBLIC + " deploy@ci",
    "MIIDXTCCAkWgAwIBAgIJAKL0UG+mRkSvMA0GCSqGSIb3DQEBCwUAMEUxCzAJBgNVBAYTAkFV is the cert",
    "next=%2Fdashboard%3Ftab%3Dkeys%26sort%3Ddesc",
    "https%3A%2F%2Fdocs.example.com%2Fguide%23install",
    "integrity sha384-" + _b64(_bytes("sri", 48)),
    "TOKEN_SCOPES=" + ",".join(["repo", "read:org", "workflow", "write:packages"] * 20),
    "api_key_docs=https://docs.example.com/" + "section/" * 40 + "keys",
]

# Held-out cases the check misses, said so in docs/file-format.md: a `default` .netrc line's
# password of letters only (no host to tell it from prose), a URL percent-encoded twice.
KNOWN_MISSES = frozenset(["netrc default", "double URL-encoded Redis URL"])
ALL_CREDENTIALS = CREDENTIALS + SHAPES + HELD_OUT_SHAPES
ALL_LOOK_ALIKES = LOOK_ALIKES + SHAPE_LOOK_ALIKES + HELD_OUT_LOOK_ALIKES
CAUGHT = [(label, text) for label, text in ALL_CREDENTIALS if label not in KNOWN_MISSES]
