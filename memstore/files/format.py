"""The canonical file format (`.memory/<name>.md`) and the MEMORY.md index.

A memory file is YAML frontmatter (name, description, type, then any keys memstore does not
model, in their original order) and a Markdown body, written and split with python-frontmatter.
Reading is lenient, because real folders written by people and other tools are messy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import frontmatter
import yaml
from frontmatter.default_handlers import YAMLHandler

from memstore.errors import InvalidMemory, NotAMemory, UnreadableFile
from memstore.limits import INDEX_DESCRIPTION_MAX_CHARS
from memstore.storage.fields import (
    CLEAR,
    CONTENT,
    FRONTMATTER_KEYS,
    REQUIRED_FIELDS,
    RULES,
    Place,
)
from memstore.storage.records import MemoryRecord, MemorySummary, MemoryType
from memstore.storage.validation import normalize_newlines
from memstore.text import shorten

INDEX_FILE_NAME = "MEMORY.md"
INDEX_MAX_LINES = 200
INDEX_MAX_BYTES = 25_000
# The frontmatter keys that are a memory's fields (storage/fields.py), in the file's order;
# every other key is kept in `extra`.
MODELED_KEYS = FRONTMATTER_KEYS
TYPE_ORDER = {t.value: i for i, t in enumerate(MemoryType)}
_HANDLER = YAMLHandler()
_BEYOND_BMP = re.compile("[\U00010000-\U0010ffff]")
_STR_TAG = "tag:yaml.org,2002:str"
# What a plain scalar means (string, number, bool, null, date, …), as PyYAML decides it.
_RESOLVER = yaml.resolver.Resolver()


class _TextLoader(yaml.CSafeLoader):
    """Safe loading that keeps what people wrote: only `true`/`false`, `null`/`~` and plain
    integers are typed; everything else, dates, times (`12:30`), numbers with a leading zero
    (`012345`), floats (`1.10`) and YAML 1.1's yes/no/on/off included, stays the exact text.

    PyYAML follows YAML 1.1, which would turn `12:30` into 750 and `yes` into True, and
    writing those back would change someone's file; unmodeled keys are stored as JSON, too.
    """

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012  (PyYAML's class attribute)


for _tag, _pattern, _first in [
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("int", r"^[-+]?(?:0|[1-9][0-9]*)$", "-+0123456789"),
]:
    _TextLoader.add_implicit_resolver(
        f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), list(_first)
    )


def memory_file_name(name: str) -> str:
    return f"{name}.md"


def synced_extra(extra: dict[str, Any], type_: str) -> dict[str, Any]:
    """Unmodeled keys as written: Claude Code keeps the type under `metadata:` too, and that
    copy must say what the memory's type is now (when it named one of memstore's types)."""
    nested = extra.get("metadata")
    # A type memstore does not know there (read with --default-type) stays as written.
    if isinstance(nested, dict) and nested.get("type") in TYPE_ORDER and nested["type"] != type_:
        return {**extra, "metadata": {**nested, "type": type_}}
    return extra


def render_memory_file(memory: MemoryRecord) -> str:
    metadata: dict[str, Any] = {
        key: value for key in MODELED_KEYS if (value := getattr(memory, key)) is not None
    }
    for key, value in memory.extra.items():
        if key not in MODELED_KEYS:
            metadata[key] = value
    metadata.update(synced_extra(memory.extra, memory.type))
    post = frontmatter.Post(memory.body)
    post.metadata = metadata
    # libyaml escapes characters beyond the BMP (emoji); the pure-Python dumper writes them
    # as they are. Only those few files pay for the slower dumper.
    beyond_bmp = _BEYOND_BMP.search(json.dumps(metadata, ensure_ascii=False)) is not None
    dumper = yaml.SafeDumper if beyond_bmp else yaml.CSafeDumper
    return frontmatter.dumps(post, Dumper=dumper, sort_keys=False, width=1_000_000) + "\n"


@dataclass(frozen=True)
class ParsedFile:
    metadata: dict[str, Any]
    body: str
    # Set when strict YAML failed and the line-by-line reading was used.
    lenient_yaml: bool = False


def parse_memory_text(text: str) -> ParsedFile:
    """Split and read a memory file's text; raise UnreadableFile with a reason."""
    text = normalize_newlines(text.removeprefix("\ufeff")).strip()
    if not _HANDLER.detect(text):
        raise NotAMemory("no frontmatter (the file must start with a '---' line)")
    try:
        front, body = _HANDLER.split(text)
    except ValueError:
        raise UnreadableFile("frontmatter has no closing '---' line") from None
    lenient = False
    try:
        metadata = _read_plain_frontmatter(front.strip("\n"))
        if metadata is None:
            metadata = yaml.load(front, Loader=_TextLoader)
    except RecursionError:
        raise UnreadableFile("frontmatter nests too deep to read") from None
    except yaml.YAMLError as error:
        metadata = _read_requoted_yaml(front)
        if metadata is None:
            metadata = _read_lenient_yaml(front)
        if metadata is None:
            problem = str(error).splitlines()[0]
            raise UnreadableFile(f"frontmatter is not readable YAML ({problem})") from None
        lenient = True
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise UnreadableFile("frontmatter is not a mapping of keys to values")
    return ParsedFile(_json_safe(metadata), body.strip(), lenient)


def memory_fields(text: str) -> dict[str, Any]:
    """A memory's canonical text (as `memctl edit` shows it) read back as the changes of an
    update: every field of a memory (storage/fields.py), CLEAR for an optional one the text
    leaves out. UnreadableFile, or InvalidMemory when the frontmatter lacks a required key."""
    parsed = parse_memory_text(text)
    metadata = parsed.metadata
    for key in CONTENT:
        required = key in MODELED_KEYS and key in REQUIRED_FIELDS
        if required and not isinstance(metadata.get(key), str):
            raise InvalidMemory(key, "must be present in the frontmatter as text")
    fields: dict[str, Any] = {}
    for key, rule in RULES.items():
        if rule.place is Place.BODY:
            fields[key] = parsed.body
        elif rule.place is Place.EXTRA:
            fields[key] = {k: v for k, v in metadata.items() if k not in MODELED_KEYS}
        else:
            fields[key] = CLEAR if metadata.get(key) is None else metadata[key]
    return fields


_PLAIN_LINE = re.compile(r"([A-Za-z_][\w-]*): (\S(?:.*\S)?)")
# Characters that give a plain YAML scalar another meaning when they start it.
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")


def _read_plain_frontmatter(front: str) -> dict[str, Any] | None:
    """Frontmatter of one-line `key: value` pairs whose values YAML reads as the same text
    (what memstore itself writes for most memories), read without the YAML parser; None
    for anything else, which then goes to the parser.

    PyYAML's constructor is most of the cost of reading a file, and so a large part of an
    import's (benchmarks/bench_store.py). tests/test_files.py checks this against yaml.load.
    """
    metadata: dict[str, Any] = {}
    for line in front.split("\n"):  # not splitlines(): YAML breaks lines at \n only
        match = _PLAIN_LINE.fullmatch(line)
        if match is None:
            return None
        key, value = match.groups()
        if (
            key in metadata
            or _RESOLVER.resolve(yaml.ScalarNode, key, (True, False)) != _STR_TAG
            or value[0] in _INDICATORS
            or ": " in value
            or " #" in value
            or value.endswith(":")
            or not value.isprintable()
            or _RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) != _STR_TAG
        ):
            return None
        metadata[key] = value
    return metadata or None


_UNQUOTED_VALUE = re.compile(r"^([A-Za-z_][\w.-]*):[ \t]+([^'\"\[{|>&*!].*?)[ \t]*$")


def _read_requoted_yaml(front: str) -> dict[str, Any] | None:
    """Strict YAML again after quoting the top-level values that people write unquoted but
    YAML cannot read, such as `description: Rule: never push to main`. Lists, nesting and
    typed values elsewhere in the frontmatter read as YAML means them."""
    lines = []
    for line in front.split("\n"):
        match = _UNQUOTED_VALUE.match(line)
        if match and (": " in match.group(2) or " #" in match.group(2)):
            key, value = match.groups()
            line = f"{key}: '{value.replace(chr(39), chr(39) * 2)}'"
        lines.append(line)
    try:
        metadata = yaml.load("\n".join(lines), Loader=_TextLoader)
    except yaml.YAMLError:
        return None
    return metadata if isinstance(metadata, dict) else None


_KEY_LINE = re.compile(r"^([A-Za-z_][\w.-]*)\s*:(?:\s+(.*?))?\s*$")
_LIST_LINE = re.compile(r"^-\s+(.*?)\s*$")


def _read_lenient_yaml(front: str) -> dict[str, Any] | None:
    """Read `key: value` lines the way a person meant them, e.g. an unquoted ': ' in a value.

    Handles one level of nesting (`metadata:` with indented keys or `- items`) and folds
    continuation lines into the value above. None when no line looks like `key: value`.
    """
    result: dict[str, Any] = {}
    last_key: str | None = None
    nested_key: str | None = None
    for raw_line in front.splitlines():
        if not raw_line.strip() or raw_line.lstrip().startswith("#"):
            continue
        indented = raw_line[0] in " \t"
        line = raw_line.strip()
        key_match = _KEY_LINE.match(line)
        if not indented and key_match:
            key, value = key_match.groups()
            result[key] = _lenient_scalar(value) if value else None
            last_key = nested_key = key
            continue
        if indented and nested_key is not None:
            container = result.get(nested_key)
            list_match = _LIST_LINE.match(line)
            if key_match and (container is None or isinstance(container, dict)):
                container = container if isinstance(container, dict) else {}
                key, value = key_match.groups()
                container[key] = _lenient_scalar(value) if value else None
                result[nested_key] = container
                continue
            if list_match and (container is None or isinstance(container, list)):
                container = container if isinstance(container, list) else []
                container.append(_lenient_scalar(list_match.group(1)))
                result[nested_key] = container
                continue
        if last_key is not None and isinstance(result.get(last_key), str):
            result[last_key] = f"{result[last_key]} {line}"
            continue
        return None
    return result or None


def _lenient_scalar(value: str) -> Any:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        return inner.replace("''", "'") if value[0] == "'" else inner.replace('\\"', '"')
    try:
        loaded = yaml.load(value, Loader=_TextLoader)
    except yaml.YAMLError:
        return value
    return loaded if isinstance(loaded, str | int | float | bool) else value


FRONTMATTER_MAX_VALUES = 10_000
FRONTMATTER_MAX_DEPTH = 32


def _json_safe(value: Any) -> Any:
    """Unmodeled values are stored as JSON: keys become strings, odd YAML types text.

    YAML aliases let a few hundred bytes expand into millions of values; a frontmatter of
    more than FRONTMATTER_MAX_VALUES values is refused. So is one nested deeper than
    FRONTMATTER_MAX_DEPTH: every later reader (JSON, YAML, the agent) recurses through it.
    """
    budget = [FRONTMATTER_MAX_VALUES]

    def convert(item: Any, depth: int = 0) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise UnreadableFile(
                f"frontmatter has over {FRONTMATTER_MAX_VALUES:,} values (YAML aliases?)"
            )
        if depth > FRONTMATTER_MAX_DEPTH and isinstance(item, Mapping | list | tuple):
            raise UnreadableFile(f"frontmatter nests deeper than {FRONTMATTER_MAX_DEPTH} levels")
        if isinstance(item, Mapping):
            return {str(k): convert(v, depth + 1) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [convert(v, depth + 1) for v in item]
        if item is None or isinstance(item, str | int | bool):
            return item
        return str(item)

    return convert(value)


def _utf8_size(line: str) -> int:
    return len(line.encode())


def render_index(
    entries: Iterable[MemorySummary],
    *,
    max_bytes: int = INDEX_MAX_BYTES,
    files: Mapping[str, str] | None = None,
    size_of: Callable[[str], int] = _utf8_size,
) -> str:
    """MEMORY.md: one line per memory, preferences first, at most 200 lines and 25,000 bytes
    (`max_bytes` for a smaller room: Claude Code's hook context; `size_of` a line's size
    where it is shown otherwise, escaped). `files` maps the name of a memory kept in another
    file than `<name>.md` (one imported from another tool) to it."""
    ordered = sorted(entries, key=lambda e: (TYPE_ORDER.get(e.type, len(TYPE_ORDER)), e.name))
    lines = [index_line(entry, (files or {}).get(entry.name)) for entry in ordered]
    if len(lines) <= INDEX_MAX_LINES and sum(map(size_of, lines)) <= max_bytes:
        return "".join(lines)
    kept: list[str] = []
    size = 0
    note_room = len(omitted_note(len(lines), max_bytes).encode())
    for line in lines:
        line_size = size_of(line)
        if len(kept) + 2 > INDEX_MAX_LINES or size + line_size + note_room > max_bytes:
            break
        kept.append(line)
        size += line_size
    return "".join(kept) + omitted_note(len(lines) - len(kept), max_bytes)


def index_line(entry: MemorySummary, file_name: str | None = None) -> str:
    """`- [name](file) — description`: memstore's index line, and Claude Code's form too
    (`file_name` when the memory is kept in another file than `<name>.md`)."""
    description = shorten(entry.description, INDEX_DESCRIPTION_MAX_CHARS)
    target = _link_target(file_name or memory_file_name(entry.name))
    return f"- [{entry.name}]({target}) — {description}\n"


def _link_target(file_name: str) -> str:
    """A file name as a Markdown link's target: in angle brackets when a space or a
    parenthesis would end a plain one (a hand-written file, `my notes.md`)."""
    if not re.search(r"[\s()<>]", file_name):
        return file_name
    return "<" + file_name.replace("<", "%3C").replace(">", "%3E") + ">"


def omitted_note(count: int, max_bytes: int) -> str:
    return (
        f"> {count} more memories are not listed: this index is capped at {INDEX_MAX_LINES} "
        f"lines and {max_bytes:,} bytes. Run `memctl list` to see them all.\n"
    )
