"""The deterministic secrets scanner: credentials it must catch, ordinary text it must leave
alone, and hostile input it must get through quickly."""

from __future__ import annotations

import base64
import json
import sqlite3
import time
from pathlib import Path

import pytest
from anthropic import Anthropic
from memctl.app import app
from typer.testing import CliRunner

from memstore.errors import ConsolidationRefused, ImportRejected, InvalidMemory, SecretRefused
from memstore.files.importer import import_memories
from memstore.learning.consolidate import consolidate_memories
from memstore.learning.extract import extract_memories
from memstore.learning.remember import remember
from memstore.storage import secrets
from memstore.storage.secrets import find_secrets, memory_secret
from memstore.storage.store import MemoryStore
from memstore.storage.undo import undo_run
from tests.anthropic_server import AnthropicServer, text_reply
from tests.conftest import MemctlRunner, write
from tests.secret_corpus import (
    ALL_CREDENTIALS,
    ALL_LOOK_ALIKES,
    CAUGHT,
    CREDENTIALS,
    KNOWN_MISSES,
    LOOK_ALIKES,
)

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
    # The rules of issue 28's shapes.
    "a:1:b:c:" * 25_000,
    "a:1:" + "b\\:" * 70_000,
    "M" * 200_000,
    "LS0tLS1CRUdJTi" * 14_000,
    "b3BlbnNzaC1rZXktdjE" * 11_000,
    "&sig=" * 40_000,
    ("&sig=" + "A" * 60) * 3_000,
    "%3A%2F%2Fa:" * 20_000,
    "docker login -p" * 14_000,
    "machine a.b login c password " * 7_000,
    "default login x " * 13_000,
    ("password=" + "a1" * 200 + "(") * 480,
    ('api_key="' + "a1" * 200) * 480,
    "https://u:" + "p" * 200_000,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda text: repr(text[:16]))
def test_adversarial_input_is_scanned_quickly(text: str) -> None:
    assert len(text) >= 190_000
    # Every rule's trigger, so that every rule scans the whole text.
    text += " sk-ant- :// eyJ Bearer passw secret token key access AKIA ghp_ glpat- xox xapp-"
    text += " hooks.slack.com AIza k_live_ npm_ hf_ SG. PRIVATE KEY LS0tLS1CRUdJTi sig="
    text += " %3A%2F%2F docker login machine default :1:a:b:c b3BlbnNzaC1rZXktdjE M"
    started = time.perf_counter()
    find_secrets(text)
    # About 0.2 s here; a rule that backtracks takes minutes. A busy machine may take more.
    assert time.perf_counter() - started < 5.0


def test_only_the_first_megabyte_is_scanned() -> None:
    secret = "ghp_" + "a1B2c3D4e5" * 4
    inside = " " * (secrets.SCAN_MAX_CHARS - 100) + secret
    assert kinds(inside) == ["GitHub token"]
    beyond = " " * secrets.SCAN_MAX_CHARS + secret
    assert find_secrets(beyond) == []


# -- the tables (tests/secret_corpus.py): credentials and look-alikes, through every door --


def test_the_tables_are_large_enough() -> None:
    assert len(CREDENTIALS) >= 30 and len(LOOK_ALIKES) >= 40
    assert len(ALL_CREDENTIALS) >= 70 and len(ALL_LOOK_ALIKES) >= 70


@pytest.mark.parametrize(("label", "text"), CAUGHT, ids=[c[0] for c in CAUGHT])
def test_each_credential_is_found(label: str, text: str) -> None:
    assert find_secrets(text), label


@pytest.mark.parametrize("label", sorted(KNOWN_MISSES))
def test_the_known_misses_are_as_the_docs_say(label: str) -> None:
    assert find_secrets(dict(ALL_CREDENTIALS)[label]) == []


@pytest.mark.parametrize("text", ALL_LOOK_ALIKES, ids=[text[:30] for text in ALL_LOOK_ALIKES])
def test_each_look_alike_passes(text: str) -> None:
    assert find_secrets(text) == []


def test_a_long_value_is_judged_whole() -> None:
    value = "a1B2c3D4e5" * 40
    found = find_secrets(f"DB_PASSWORD={value} # rotated monthly")
    assert kinds(f"DB_PASSWORD={value}") == ["secret assignment"]
    assert found[0].end == len("DB_PASSWORD=") + len(value)
    # Judged as a whole value is: code after it, a placeholder, an unclosed quote, a key that
    # names a file.
    assert find_secrets(f"DB_PASSWORD={value}(salt)") == []
    assert find_secrets("API_KEY=" + "x" * 400) == []
    assert find_secrets(f'SECRET_KEY="{value}') == []
    assert find_secrets(f"SECRET_KEY_FILE={value}") == []
    # A key word inside a long value is not tried again, and a key after it is.
    assert kinds(f"SECRET={value}password=x ghp_{'a1B2c3D4e5' * 4}") == [
        "secret assignment",
        "GitHub token",
    ]


def test_a_memory_past_what_the_check_reads_is_refused() -> None:
    limit = secrets.SCAN_MAX_CHARS
    assert memory_secret("notes", "d", "b", {"notes": "x " * (limit // 2 - 20)}) is None
    found = memory_secret("notes", "d", "b", {"notes": "x " * (limit // 2)})
    assert found is not None and found.field == "extra"
    error = secrets.refusal(found, "notes")
    assert isinstance(error, SecretRefused) and "\n" not in str(error)
    assert str(error) == (
        f"memory 'notes': extra is too long to check for secrets ({found.finding.end:,} "
        f"characters with the rest of the memory; the check reads {limit:,}); not saved"
    )


def test_import_reads_a_file_whole_or_refuses_it(memctl: MemctlRunner, tmp_path: Path) -> None:
    token = "ghp_" + "x7Kq2mP9vR4sT1wY6zB3nC8dF5gH0jL2aE4i"
    # A token after the first megabyte of a file under import's limit (1 MiB): stored
    # unread before.
    notes = "x " * 500_100 + token
    write(
        tmp_path / "a" / "big.md", f"---\ntype: project\ndescription: d\nnotes: {notes}\n---\nb\n"
    )
    done = memctl("import", str(tmp_path / "a"))
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == (
        "invalid: big.md: extra holds what looks like a GitHub token; secrets are not saved"
        " (--allow-secret imports it)"
    )
    # Frontmatter that grows as JSON (each '"' escaped) past what the check reads: refused
    # in one line, not stored unread.
    notes = 'x"' * 500_000
    write(
        tmp_path / "b" / "big.md", f"---\ntype: project\ndescription: d\nnotes: {notes}\n---\nb\n"
    )
    done = memctl("import", str(tmp_path / "b"))
    assert done.returncode == 1
    first = done.stderr.splitlines()[0]
    assert first.startswith("invalid: big.md: extra is too long to check for secrets (1,500,0"), (
        first
    )
    assert first.endswith("the check reads 1,048,576); not saved (--allow-secret imports it)")
    assert "Traceback" not in done.stderr
    assert memctl("list", "--json").stdout.strip() in ("", "[]")


def test_a_memory_is_checked_as_a_whole() -> None:
    key = "AKIA2E0A8F3B244C9986"
    # Split between the description and the body, with nothing or a line break between.
    split = memory_secret("deploy-notes", f"Deploy key {key[:9]}", f"{key[9:]} for staging")
    assert split is not None and split.field == "description and body"
    # /remember makes names from the first words: the name is read as words.
    named = memory_secret("my-password-is-hunter2", "notes", "see the wiki")
    assert named is not None and named.field == "name"
    extra = memory_secret(
        "n", "d", "b", {"api_key": "ghp_" + "x7Kq2mP9vR4sT1wY6zB3nC8dF5gH0jL2aE4i"}
    )
    assert extra is not None and extra.field == "extra"
    # Words that merely meet at the join are no secret.
    assert memory_secret("notes", "Password policy", "is 12 characters at least") is None


def _in_process(db: Path, *args: str, input: str = "") -> tuple[int, str]:
    """memctl's own app, run in this process (the table is too long for a subprocess per
    row); exit code and stderr."""
    done = CliRunner().invoke(app, ["--db", str(db), *args], input=input)
    return done.exit_code, done.stderr


def test_memctl_add_and_edit_refuse_every_credential(tmp_path: Path) -> None:
    db = tmp_path / "memstore.db"
    assert _in_process(db, "add", "notes", "-t", "project", "-d", "Notes", "-b", "plain")[0] == 0
    problems = []
    for index, (label, text) in enumerate(CREDENTIALS):
        added = _in_process(db, "add", f"c-{index}", "-t", "project", "-d", "x", input=text)
        edited = _in_process(db, "edit", "notes", "-b", text)
        for door, (code, stderr) in (("add", added), ("edit", edited)):
            lines = stderr.strip().splitlines()
            if code != 1 or len(lines) != 1 or "--allow-secret" not in lines[0]:
                problems.append(f"{door} {label}: {code} {stderr!r}")
    assert problems == []
    with MemoryStore(db) as store:
        assert [(m.name, m.body) for m in store.memories()] == [("notes", "plain")]


def test_look_alikes_pass_memctl_add(tmp_path: Path) -> None:
    db = tmp_path / "memstore.db"
    problems = []
    for index, text in enumerate(LOOK_ALIKES):
        code, stderr = _in_process(db, "add", f"l-{index}", "-t", "project", "-d", "N", input=text)
        if code != 0:
            problems.append(f"{text!r}: {stderr}")
    assert problems == []


def test_memctl_says_which_field_holds_what(memctl: MemctlRunner) -> None:
    done = memctl(
        "add", "deploy", "-t", "project", "-d", "Deploy notes",
        "-b", "AKIA2E0A8F3B244C9986 https://admin:hunter2@db.example.com",
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr == (
        "memctl: error: memory 'deploy': body holds what looks like an AWS access key id; "
        "secrets are not saved; if it is not a secret, run again with --allow-secret\n"
    )


def test_allow_secret_is_the_explicit_override(tmp_path: Path, memctl: MemctlRunner) -> None:
    text = "the wifi password is 84721936"
    assert memctl("add", "wifi", "-t", "user", "-d", "Wifi", "-b", text).returncode == 1
    done = memctl("add", "wifi", "-t", "user", "-d", "Wifi", "-b", text, "--allow-secret")
    assert done.returncode == 0, done.stderr
    # Its value never reaches the run's record; the option names do.
    commands = [
        row[0]
        for row in sqlite3.connect(tmp_path / ".memory" / "memstore.db").execute(
            "SELECT command FROM run"
        )
    ]
    assert commands == ["memctl add wifi -t ... -d ... -b ... --allow-secret"]
    # Renaming needs the override again (the name joins the text checked); a type change
    # does not touch the text.
    assert memctl("edit", "wifi", "-t", "project").returncode == 0
    assert memctl("edit", "wifi", "-d", "Office wifi").returncode == 1
    assert memctl("edit", "wifi", "-d", "Office wifi", "--allow-secret").returncode == 0
    # Restore brings text back to life: checked too.
    assert memctl("rm", "wifi").returncode == 0
    assert memctl("restore", "wifi").returncode == 1
    assert memctl("restore", "wifi", "--allow-secret").returncode == 0


def test_option_values_are_not_recorded(tmp_path: Path, memctl: MemctlRunner) -> None:
    for args in (
        ["add", "a", "--type", "user", "--description", "SECRET-1", "--body", "SECRET-2"],
        ["add", "b", "-t", "user", "-dSECRET-3", "--body=SECRET-4"],
        ["edit", "a", "-b", "SECRET-5", "--name", "a2"],
    ):
        assert memctl(*args).returncode == 0
    commands = [
        row[0]
        for row in sqlite3.connect(tmp_path / ".memory" / "memstore.db").execute(
            "SELECT command FROM run ORDER BY started_at"
        )
    ]
    assert commands == [
        "memctl add a --type ... --description ... --body ...",
        "memctl add b -t ... -d... --body=...",
        "memctl edit a -b ... --name ...",
    ]
    assert "SECRET" not in json.dumps(commands)


def test_import_refuses_each_credential(tmp_path: Path, store: MemoryStore) -> None:
    for index, (label, text) in enumerate(CREDENTIALS):
        folder = tmp_path / f"in-{index}"
        write(folder / "fine.md", "---\nname: fine\ntype: project\ndescription: ok\n---\nok\n")
        write(folder / "key.md", f"---\nname: key\ntype: project\ndescription: k\n---\n{text}\n")
        with pytest.raises(ImportRejected) as rejected:
            import_memories(store, folder)
        assert [p.path for p in rejected.value.problems] == ["key.md"], label
        assert "looks like" in rejected.value.problems[0].reason, label
        assert store.count() == 0, label
    # In frontmatter too (kept as extra metadata, written back on export).
    folder = tmp_path / "front"
    token = "ghp_" + "x7Kq2mP9vR4sT1wY6zB3nC8dF5gH0jL2aE4i"
    write(
        folder / "a.md", f"---\nname: a\ntype: project\ndescription: a\ntoken: {token}\n---\nok\n"
    )
    with pytest.raises(ImportRejected) as rejected:
        import_memories(store, folder)
    assert rejected.value.problems[0].reason.startswith("extra holds what looks like")


def test_memctl_import_refuses_and_allows(tmp_path: Path, memctl: MemctlRunner) -> None:
    folder = tmp_path / "notes"
    for index, text in enumerate(LOOK_ALIKES):
        write(
            folder / f"note-{index}.md", f"---\ntype: project\ndescription: n{index}\n---\n{text}\n"
        )
    done = memctl("import", str(folder))
    assert done.returncode == 0, done.stderr
    assert len(json.loads(memctl("list", "--json").stdout)) == len(LOOK_ALIKES)
    write(folder / "leak.md", "---\ntype: project\ndescription: l\n---\nmy password is hunter2\n")
    done = memctl("import", str(folder))
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == (
        "invalid: leak.md: body holds what looks like a password; secrets are not saved"
        " (--allow-secret imports it)"
    )
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 2
    # The file with the secret is skipped like any invalid file; the rest is imported.
    write(folder / "more.md", "---\ntype: project\ndescription: m\n---\nmore\n")
    done = memctl("import", str(folder), "--skip-invalid")
    assert done.returncode == 0, done.stderr
    names = {m["name"] for m in json.loads(memctl("list", "--json").stdout)}
    assert "more" in names and "leak" not in names
    assert memctl("import", str(folder), "--allow-secret").returncode == 0
    assert len(json.loads(memctl("list", "--json").stdout)) == len(LOOK_ALIKES) + 2


def test_import_reads_back_a_secret_kept_with_allow_secret(
    tmp_path: Path, memctl: MemctlRunner
) -> None:
    """A memory kept with --allow-secret, exported, is read back unchanged by a plain import;
    a new or changed secret in a file is still refused."""
    key = "AKIA" + "IOSFODNN7EXAMPLE"
    done = memctl("add", "sec", "-t", "reference", "-d", "s", "--allow-secret", "-b", key)
    assert done.returncode == 0, done.stderr
    assert memctl("export").returncode == 0
    done = memctl("import")
    assert done.returncode == 0, done.stderr
    assert "0 created, 0 updated, 1 unchanged" in done.stderr
    # The same file where no export recorded it: it says what the memory says.
    exported = (tmp_path / ".memory" / "sec.md").read_text()
    write(tmp_path / "copy" / "sec.md", exported)
    done = memctl("import", str(tmp_path / "copy"))
    assert done.returncode == 0, done.stderr
    assert "0 created, 0 updated, 1 unchanged" in done.stderr

    other = "AKIA" + "IOSFODNN7EXAMPLF"
    for index, (name, text) in enumerate(
        [
            ("sec.md", exported.replace(key, other)),  # a changed secret
            ("sec.md", exported.replace("description: s", "description: t")),  # changed
            ("copy.md", exported.replace("name: sec", "name: copy")),  # a new memory
        ]
    ):
        write(tmp_path / f"changed-{index}" / name, text)
        done = memctl("import", str(tmp_path / f"changed-{index}"))
        assert done.returncode == 1, name
        assert done.stderr.startswith(f"invalid: {name}: body holds what looks like"), done.stderr
    (tmp_path / ".memory" / "sec.md").write_text(exported.replace(key, other))
    done = memctl("import")  # the exported file, edited since
    assert done.returncode == 1 and "invalid: sec.md: body holds" in done.stderr
    assert json.loads(memctl("list", "--json").stdout)[0]["description"] == "s"


def test_remember_refuses_every_credential_and_keeps_look_alikes(store: MemoryStore) -> None:
    for label, text in CREDENTIALS:
        with pytest.raises(InvalidMemory, match="secret"):
            remember(store, text)
        assert store.count() == 0, label
    for text in LOOK_ALIKES:
        remember(store, f"project: {text}")
    assert store.count() == len(LOOK_ALIKES)


def _item(name: str, body: str) -> dict[str, str]:
    return {"name": name, "type": "project", "description": "Learnt", "body": body}


def test_extraction_drops_every_credential_and_keeps_look_alikes(
    store: MemoryStore, client: Anthropic, anthropic_server: AnthropicServer
) -> None:
    items = [_item(f"cred-{i}", text) for i, (_, text) in enumerate(CREDENTIALS)]
    # A credential as the name, and one split between description and body.
    items.append(_item("ghp_x7Kq2mP9vR4sT1wY6zB3nC8dF5gH0jL2aE4i", "a token"))
    items.append({**_item("split", "F3B244C9986 for staging"), "description": "AKIA2E0A8"})
    anthropic_server.script(text_reply(json.dumps(items)))
    messages = [{"role": "user", "content": "remember these"}]
    result = extract_memories(messages, store=store, client=client, max_items=100)
    assert result.created == [] and len(result.dropped) == len(items)
    assert all("secret" in reason for reason in result.dropped)
    assert store.count() == 0

    items = [_item(f"note-{i}", text) for i, text in enumerate(LOOK_ALIKES)]
    anthropic_server.script(text_reply(json.dumps(items)))
    result = extract_memories(messages, store=store, client=client, max_items=100)
    assert result.dropped == [] and len(result.created) == len(LOOK_ALIKES)


def test_consolidation_refuses_every_credential_and_keeps_look_alikes(
    store: MemoryStore, client: Anthropic, anthropic_server: AnthropicServer
) -> None:
    def merge_a_and_b(body: str, name: str) -> None:
        plan = {"merge": [{"sources": ["a", "b"], **_item(name, body)}], "drop": []}
        anthropic_server.script(text_reply(json.dumps(plan)))
        consolidate_memories(store=store, client=client, confirmed=True)

    with store.transaction() as tx:
        tx.create("a", "project", "A", "first")
        tx.create("b", "project", "B", "second")
    for label, text in CREDENTIALS:
        with pytest.raises(ConsolidationRefused, match="secret"):
            merge_a_and_b(text, "ab")
        assert sorted(m.name for m in store.memories()) == ["a", "b"], label
    for index, text in enumerate(LOOK_ALIKES):
        merge_a_and_b(text, "a")
        assert [(m.name, m.body) for m in store.memories()] == [("a", text)]
        store.create("b", "project", "B", f"second {index}")


@pytest.mark.both_engines
def test_undo_and_restore_cannot_bring_a_refused_text_back(store: MemoryStore) -> None:
    leak = "my password is hunter2"
    store.create("wifi", "user", "Wifi", leak, allow_secrets=True)
    with store.transaction() as tx:
        tx.update(tx.get("wifi"), body="ask the office manager")
    cleaned = store.history.events("wifi")[-1].run_id
    with pytest.raises(SecretRefused):
        undo_run(store, cleaned)
    assert store.get("wifi").body == "ask the office manager"
    store.delete("wifi")
    store.create("wifi", "user", "Wifi", leak, allow_secrets=True)
    store.delete("wifi")
    with pytest.raises(SecretRefused):
        store.restore("wifi")
    assert store.find("wifi") is None


def test_basic_credentials_placeholders_pass() -> None:
    placeholder = base64.b64encode(b"username:password").decode()
    assert find_secrets(f"Authorization: Basic {placeholder}") == []
