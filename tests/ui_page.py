"""The page as a browser reads it, for the page's tests (tests/test_ui*.py): its HTML parsed
(or Chromium's DOM, dumped), what it shows collected, and the check that nothing of a
memory's became markup."""

from __future__ import annotations

from html.parser import HTMLParser

HIDDEN = ["\u202e", "\u202c", "\u2066", "\u2069", "\u200f", "\x1b", "\x9b", "\x07", "\U000e0069"]


def assert_inert(html: str) -> None:
    """Nothing of a memory's became markup: no script, no element the page does not make,
    no handler attribute, no link off the page, no hidden character left as it is."""
    page = parsed(html)
    assert not page.unexpected, page.unexpected
    assert not page.handlers, page.handlers
    assert all(href.startswith(("/", "#")) for href in page.hrefs), page.hrefs
    assert not any(character in html for character in HIDDEN)


# The elements the page's templates make: any other one came from a memory's text.
ELEMENTS = {
    "html", "head", "meta", "title", "link", "body", "header", "nav", "strong", "a", "p",
    "code", "main", "h1", "h2", "form", "input", "select", "option", "button", "ul", "li",
    "span", "table", "thead", "tbody", "tr", "th", "td", "div", "pre", "ol", "mark", "svg",
    "polyline", "text", "line", "textarea", "label", "dl", "dt", "dd", "section", "br",
}  # fmt: skip


class Page(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.unexpected: list[str] = []
        self.handlers: list[str] = []
        self.hrefs: list[str] = []
        self.counts: list[tuple[str, str]] = []
        self.marks: list[str] = []
        self.diff_lines: list[str] = []
        self.file = ""
        self.block = ""
        self._open: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag not in ELEMENTS or attributes.get("id") == "injected":
            self.unexpected.append(tag)
        self.handlers += [name for name, _ in attrs if name.startswith("on")]
        if "href" in attributes or "src" in attributes:
            self.hrefs.append(str(attributes.get("href") or attributes.get("src")))
        if tag not in ("meta", "link", "input", "br"):
            self._open.append((tag, attributes))

    def handle_endtag(self, tag: str) -> None:
        while self._open and self._open.pop()[0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        for tag, attributes in self._open[::-1]:
            if tag == "mark":
                self.marks.append(data)
            if tag == "span" and attributes.get("data-type"):
                self.counts.append((str(attributes["data-type"]), data))
            if tag == "span" and attributes.get("class") in ("add", "remove", "context"):
                self.diff_lines.append(data)
            if tag == "pre" and attributes.get("id") == "file":
                self.file += data
            if tag == "pre" and attributes.get("id") == "block":
                self.block += data


def parsed(html: str) -> Page:
    return Page(html)
