"""`memctl ui`'s server: the store checked readable, a socket on 127.0.0.1 (the port asked
for, or one the system picks), a fresh random token, the URL printed (and opened in a
browser, unless asked not to), then uvicorn until Ctrl-C.

uvicorn logs no request: its access log would print every URL, token included.
"""

from __future__ import annotations

import secrets
import socket
import sys
import webbrowser
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
    if open_browser:
        webbrowser.open(address)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", server_header=False
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
