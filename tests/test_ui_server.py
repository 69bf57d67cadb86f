"""`memctl ui` as a person runs it: a process that prints its URL, serves the page to that
URL only (the token, the Host, 127.0.0.1), opens it in a browser without showing the token
on any command line, stops on Ctrl-C, and says in one line what is wrong (no store, a port
taken)."""

from __future__ import annotations

import html
import http.client
import re
import signal
import socket
import stat
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from memstore.storage.store import MemoryStore
from tests.conftest import MemctlRunner
from tests.ui_server import running_ui

pytestmark = pytest.mark.both_engines


@pytest.fixture
def filled(workspace_database: Path | str) -> None:
    with MemoryStore(workspace_database, actor="test") as store:
        store.create("deploy-notes", "project", "How we deploy", "Run make deploy.")


def get(port: int, path: str, host: str | None = None) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {"Host": host} if host is not None else {}
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_memctl_ui_serves_its_url_only(
    filled: None, tmp_path: Path, database_env: dict[str, str]
) -> None:
    with running_ui(tmp_path, database_env) as ui:
        with urllib.request.urlopen(ui.url, timeout=10) as page:
            assert page.status == 200
            assert "deploy-notes" in page.read().decode()
        assert get(ui.port, "/")[0] == 403
        assert get(ui.port, "/?token=" + "x" * len(ui.token))[0] == 403
        assert get(ui.port, f"/?token={ui.token}", host=f"rebound.example:{ui.port}")[0] == 403
        with pytest.raises(OSError):  # 127.0.0.1 only: not on the machine's other addresses
            socket.create_connection((other_address(), ui.port), timeout=2).close()
        assert ui.started_in_s < 10  # benchmarks/bench_ui.py measures it
        ui.process.send_signal(signal.SIGINT)
        assert ui.process.wait(timeout=15) == 130  # as any memctl stopped by Ctrl-C
        assert ui.process.stderr is not None
        assert ui.process.stderr.read().strip() == "memctl: interrupted"


def test_the_browser_is_given_a_private_file_not_the_token(
    filled: None, tmp_path: Path, database_env: dict[str, str]
) -> None:
    """`ps` shows every user of the machine each process's command line: the browser's holds
    no token. It is given a file only this user can read, which sends it on to the page, and
    which is gone when the server stops."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    recorded = tmp_path / "browser-argv"
    browser = tmp_path / "browser.sh"
    # It stays open, as a terminal browser does until quit: the page is served meanwhile.
    browser.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" > {recorded}.part\nmv {recorded}.part {recorded}\n'
        "sleep 20\n"
    )
    browser.chmod(0o755)
    env = {**database_env, "BROWSER": str(browser), "XDG_RUNTIME_DIR": str(runtime)}
    with running_ui(tmp_path, env, open_browser=True) as ui:
        (given,) = waited_for(recorded).splitlines()
        assert ui.token not in given
        opened = Path(urllib.parse.unquote(urllib.parse.urlsplit(given).path))
        assert given == opened.as_uri() and opened.parent.parent == runtime
        assert stat.S_IMODE(opened.stat().st_mode) == 0o600
        assert stat.S_IMODE(opened.parent.stat().st_mode) == 0o700
        (target,) = re.findall(r'content="0;url=([^"]+)"', opened.read_text())
        assert html.unescape(target) == ui.url
        with urllib.request.urlopen(html.unescape(target), timeout=10) as page:
            assert "deploy-notes" in page.read().decode()
        ui.process.send_signal(signal.SIGINT)
        assert ui.process.wait(timeout=15) == 130
    assert not opened.parent.exists()
    assert list(runtime.iterdir()) == []


def waited_for(path: Path, timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} was never written"
        time.sleep(0.05)
    return path.read_text()


def other_address() -> str:
    """An address of this machine that is not loopback (its outgoing interface's)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # TEST-NET: nothing is sent
        address = str(probe.getsockname()[0])
    except OSError:
        pytest.skip("this machine has no address but loopback")
    finally:
        probe.close()
    if address.startswith("127."):
        pytest.skip("this machine has no address but loopback")
    return address


def test_without_a_store_it_says_so(memctl_process: MemctlRunner, tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    done = memctl_process("ui", "--no-open")
    assert done.returncode == 0
    assert "no memory here" in done.stderr
    assert "Traceback" not in done.stderr


def test_without_the_ui_extra_it_says_how_to_install_it(
    filled: None, memctl_process: MemctlRunner, tmp_path: Path, database_env: dict[str, str]
) -> None:
    """As in a venv without the extra: starlette cannot be imported."""
    blocked = tmp_path / "blocked" / "starlette"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('not installed', name='starlette')\n")
    env = {**database_env, "PYTHONPATH": str(blocked.parent)}
    done = memctl_process("ui", "--no-open", env=env)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("memctl: error: memctl ui needs the ui extra")
    assert "pip install '.[ui]'" in line and line.endswith("see docs/ui.md")


def test_a_port_taken_is_one_line(
    filled: None, memctl_process: MemctlRunner, database_env: dict[str, str]
) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        port = taken.getsockname()[1]
        done = memctl_process("ui", "--no-open", "--port", str(port), env=database_env)
    finally:
        taken.close()
    assert done.returncode == 1
    assert done.stderr.startswith(f"memctl: error: cannot serve on 127.0.0.1:{port}")
    assert len(done.stderr.splitlines()) == 1
