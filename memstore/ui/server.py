"""`memctl ui`'s server: the store checked readable, a socket on 127.0.0.1 (the port asked
for, or one the system picks), a fresh random token, the URL printed (and opened in a
browser, unless asked not to), then uvicorn until Ctrl-C.

uvicorn logs no request: its access log would print every URL, token included. Nor is the
URL given to the browser: a process's command line is public (`ps` shows it to every user
of the machine, whom the loopback check cannot tell apart). The browser is given a file
only this user can read, in a folder only they can enter, that sends it on to the URL (as
Jupyter does); the file is removed when the server stops.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import sys
import tempfile
import threading
import webbrowser
from html import escape
from pathlib import Path

HOST = "127.0.0.1"


def token() -> str:
    """A token nobody can guess: 256 random bits."""
    return secrets.token_urlsafe(32)


def listening_socket(port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:`port` (0: a free port); OSError when it cannot."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def url(port: int, secret: str) -> str:
    return f"http://{HOST}:{port}/?token={secret}"


def opener(address: str) -> Path:
    """A page that sends a browser on to `address`, in a new folder of its own: 0700, in the
    user's runtime folder when there is one, and the file 0600."""
    runtime = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    folder = Path(tempfile.mkdtemp(prefix="memctl-ui-", dir=runtime if runtime.is_dir() else None))
    path = folder / "open.html"
    link = escape(address)
    page = (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f'<meta http-equiv="refresh" content="0;url={link}"><title>memctl ui</title></head>\n'
        f'<body><p><a href="{link}">memctl ui</a></p></body></html>\n'
    )
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(page)
    return path


def serve(
    location: Path | str, *, port: int = 0, open_browser: bool = True, shown_location: str = ""
) -> None:
    """Serve the page for the store at `location` until interrupted. The store must be
    readable as it is (NoDatabase, StoreUnavailable...: raised before anything listens)."""
    import uvicorn

    from memstore.ui.app import build_app
    from memstore.ui.reads import UiReads

    UiReads(location).close()  # a store that cannot be read is said now, in one line
    sock = listening_socket(port)
    port = sock.getsockname()[1]
    secret = token()
    app = build_app(location, token=secret, port=port, shown_location=shown_location or None)
    address = url(port, secret)
    sys.stdout.write(f"memctl ui: serving {shown_location or location} read-only at\n")
    sys.stdout.write(f"    {address}\n(Ctrl-C to stop)\n")
    sys.stdout.flush()
    opened: Path | None = None
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", server_header=False
    )
    server = uvicorn.Server(config)
    try:
        if open_browser:
            opened = written_opener(address)
            if opened is not None:
                # In its own thread: webbrowser waits for a browser named by $BROWSER to
                # exit (a terminal one runs until quit), and the page must be served meanwhile.
                threading.Thread(
                    target=webbrowser.open, args=(opened.as_uri(),), daemon=True
                ).start()
        server.run(sockets=[sock])
    finally:
        sock.close()
        if opened is not None:
            shutil.rmtree(opened.parent, ignore_errors=True)


def written_opener(address: str) -> Path | None:
    """`opener(address)`; None, with a line on stderr, when it cannot be written (the URL
    printed still works)."""
    try:
        return opener(address)
    except OSError as error:
        sys.stderr.write(
            f"memctl ui: no browser opened ({error.strerror or error}): open the URL above\n"
        )
        return None
