"""memctl ui in a real browser: headless Chromium drives the page the `memctl ui` process
serves. Each page loads with nothing on the console (a script error, or anything the
Content-Security-Policy blocked, would be there); a Chinese query finds and marks its memory;
a memory's timeline shows the diff of its edit; a consolidation's page shows its sources;
every hostile memory stays inert in the DOM Chromium built, not only in the HTML sent; and
`memctl ui` opening Chromium itself (BROWSER) lands it on the page, through the file it gives
it instead of the URL.

Screenshots of every page are saved under $MEMSTORE_TEST_ARTIFACTS/ui-screenshots (CI), or
in pytest's temporary folder. Without Chromium these tests are skipped, unless
MEMSTORE_REQUIRE_CHROMIUM=1 (as in CI, whose .ci/run installs it): there they fail.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

from memstore.storage.store import MemoryStore
from tests.ui_page import assert_inert, parsed
from tests.ui_server import RunningUi, running_ui
from tests.ui_store import HOSTILE, fill

REQUIRE_VARIABLE = "MEMSTORE_REQUIRE_CHROMIUM"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
PAGE_TIMEOUT_S = 90


def chromium() -> str:
    found = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    if found is None:
        if os.environ.get(REQUIRE_VARIABLE) == "1":
            pytest.fail("Chromium is required but not installed (apt-get install chromium)")
        pytest.skip("Chromium is not installed")
    return found


@dataclass
class Site:
    ui: RunningUi
    runs: dict[str, str]
    browser: str
    screenshots: Path
    profiles: Path


@dataclass
class Loaded:
    dom: str
    console: list[str]
    screenshot: Path


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    browser = chromium()
    folder = tmp_path_factory.mktemp("ui-workspace")
    (folder / ".git").mkdir()
    (folder / ".memory").mkdir()
    with MemoryStore(folder / ".memory" / "memstore.db", actor="test") as store:
        runs = fill(store)
    artifacts = os.environ.get("MEMSTORE_TEST_ARTIFACTS")
    base = Path(artifacts) if artifacts else tmp_path_factory.getbasetemp()
    screenshots = base / "ui-screenshots"
    screenshots.mkdir(parents=True, exist_ok=True)
    with running_ui(folder) as ui:
        yield Site(ui, runs, browser, screenshots, tmp_path_factory.mktemp("profiles"))


def load(site: Site, path: str, shot: str) -> Loaded:
    """`path` as Chromium builds it (a fresh profile: the token goes in the URL), its console
    messages, and its screenshot."""
    screenshot = site.screenshots / f"{shot}.png"
    profile = site.profiles / shot
    done = subprocess.run(
        [
            site.browser,
            "--headless",
            # Root in a container has no sandbox to give it; it only loads our own page.
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            f"--user-data-dir={profile}",
            "--window-size=1280,1000",
            f"--screenshot={screenshot}",
            "--dump-dom",
            site.ui.at(path),
        ],
        capture_output=True,
        text=True,
        timeout=PAGE_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Page load failed" not in done.stderr, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert screenshot.stat().st_size > 0
    return Loaded(done.stdout, console, screenshot)


PAGES = {
    "memories": ("/", 'id="memories"'),
    "memory": ("/memory/deploy-notes", 'id="timeline"'),
    "runs": ("/runs", 'id="runs"'),
    "recall": ("/recall?q=" + quote("how do we deploy to staging?"), 'id="block"'),
    "health": ("/health", 'id="growth"'),
}


@pytest.mark.parametrize("page", PAGES)
def test_each_page_loads_with_a_clean_console(site: Site, page: str) -> None:
    path, element = PAGES[page]
    loaded = load(site, path, page)
    assert element in loaded.dom
    assert loaded.console == []
    assert "<title>" in loaded.dom and "403" not in parsed_title(loaded.dom)
    assert_inert(loaded.dom)  # the list, the runs and health show the hostile memories too


def test_a_chinese_query_finds_its_memory(site: Site) -> None:
    loaded = load(site, "/?q=" + quote("部署"), "search-chinese")
    assert loaded.console == []
    names = re.findall(r'class="name" href="/memory/([^"]+)"', loaded.dom)
    assert names == ["deploy-chinese"]
    assert parsed(loaded.dom).marks.count("部署") >= 2


def test_a_timeline_shows_the_diff_of_an_edit(site: Site) -> None:
    loaded = load(site, "/memory/deploy-notes", "timeline")
    lines = parsed(loaded.dom).diff_lines
    assert "-Run make deploy." in lines
    assert "+Run make deploy-staging, then check the dashboard." in lines


def test_a_consolidation_shows_its_sources(site: Site) -> None:
    loaded = load(site, f"/runs/{site.runs['consolidation']}", "consolidation")
    assert loaded.console == []
    assert sorted(re.findall(r'class="source">([^<]+)<', loaded.dom)) == ["style-a", "style-b"]
    assert 'class="result">style<' in loaded.dom
    assert 'href="/memory/stale"' in loaded.dom[loaded.dom.index('id="drops"') :]


@pytest.mark.parametrize("name", [m["name"] for m in HOSTILE] + ["hostile-extra"])
def test_hostile_memories_are_inert_in_the_dom(site: Site, name: str) -> None:
    loaded = load(site, f"/memory/{name}", f"hostile-{name}")
    assert loaded.console == []  # a script that ran, or one the policy blocked, would say so
    assert_inert(loaded.dom)
    assert parsed_title(loaded.dom) == f"{name} · memctl ui"


def test_hostile_text_in_a_search_and_a_run_is_inert(site: Site) -> None:
    for path, shot in (
        ("/?q=" + quote("owned alert click evil"), "hostile-search"),
        (f"/runs/{site.runs['hostile']}", "hostile-run"),
    ):
        loaded = load(site, path, shot)
        assert loaded.console == []
        assert_inert(loaded.dom)


def test_memctl_ui_opens_the_page_in_the_browser(tmp_path: Path) -> None:
    """As `memctl ui` without --no-open: the browser BROWSER names is given the file that
    sends it on to the page, and loads the page with the token (the file's own checks are in
    test_ui_server.py)."""
    folder = tmp_path / "workspace"
    (folder / ".git").mkdir(parents=True)
    (folder / ".memory").mkdir()
    with MemoryStore(folder / ".memory" / "memstore.db", actor="test") as store:
        store.create("deploy-notes", "project", "How we deploy", "Run make deploy.")
    dom = tmp_path / "dom.html"
    command = shlex.join(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            # Time for the file's redirect to the page, and the page's load.
            "--virtual-time-budget=10000",
            "--dump-dom",
        ]
    )
    browser = tmp_path / "browser.sh"
    # In the background: memctl waits for its browser command to return before it serves.
    browser.write_text(
        f'#!/bin/sh\n({command} "$1" > {dom}.part 2>/dev/null; mv {dom}.part {dom}) &\n'
    )
    browser.chmod(0o755)
    with running_ui(folder, {"BROWSER": str(browser)}, open_browser=True):
        deadline = time.monotonic() + PAGE_TIMEOUT_S
        while not dom.exists():
            assert time.monotonic() < deadline, "Chromium never loaded the page"
            time.sleep(0.1)
    loaded = dom.read_text()
    assert parsed_title(loaded) == "Memories · memctl ui"
    assert 'href="/memory/deploy-notes"' in loaded


def parsed_title(dom: str) -> str:
    found = re.search(r"<title>(.*?)</title>", dom, re.S)
    return found.group(1) if found else ""
