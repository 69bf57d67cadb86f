"""Who may ask the page anything, checked before any route runs, and the headers every
answer carries.

The page serves one person on this machine: a request must come from a loopback address,
name this server in its Host header (127.0.0.1:PORT or localhost:PORT: another name that
resolves here is DNS rebinding, a web page's script reaching the port through its own
origin), carry the token (in the URL the first time, as Jupyter's; then in the cookie that
answer sets), and be a GET or HEAD: nothing here writes. The token is compared in constant
time. Every answer, a refusal too, says that no script runs, no frame may hold the page, and
nothing is cached or sent on as a referrer.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qsl

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_PARAMETER = "token"
LOOPBACK = frozenset({"127.0.0.1", "::1"})
# No script at all (the page has none), styles only from the page's own stylesheet (no
# inline style: a memory's text cannot restyle the page), forms only to itself.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


def cookie_name(port: int) -> str:
    """The cookie of the server on `port`: cookies do not tell ports apart, and two pages
    (two workspaces) must not take each other's token."""
    return f"memstore-ui-{port}"


class Guard:
    """ASGI middleware: refuses any request but a loopback GET or HEAD to this server's
    Host with the token; adds SECURITY_HEADERS to every answer."""

    def __init__(self, app: ASGIApp, *, token: str, port: int) -> None:
        self.app = app
        self.token = token.encode()
        self.port = port
        self.hosts = {f"127.0.0.1:{port}".encode(), f"localhost:{port}".encode()}
        self.cookie = cookie_name(port)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets: the page has no script to open one
            await _refuse(send, 403, "refused")
            return
        refusal, from_url = self._check(scope)
        if refusal is not None:
            await _refuse(send, *refusal)
            return
        cookie = self._cookie_header() if from_url else None

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), *SECURITY_HEADERS]
                if cookie is not None:
                    headers.append((b"set-cookie", cookie))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _check(self, scope: Scope) -> tuple[tuple[int, str] | None, bool]:
        """(status, reason) when refused, else None; and whether the token came in the URL."""
        client = scope.get("client")
        if client is None or client[0] not in LOOPBACK:
            return (403, "refused: only this machine may ask"), False
        headers = dict(scope["headers"])
        if headers.get(b"host") not in self.hosts:
            return (403, "refused: unknown Host"), False
        if scope["method"] not in ("GET", "HEAD"):
            return (405, "refused: this page only reads"), False
        given = _query_token(scope)
        if given is not None and hmac.compare_digest(given, self.token):
            return None, True
        cookie = _cookie_token(headers.get(b"cookie", b""), self.cookie)
        if cookie is not None and hmac.compare_digest(cookie, self.token):
            return None, False
        return (403, "refused: open the URL memctl ui printed (it carries the token)"), False

    def _cookie_header(self) -> bytes:
        value = f"{self.cookie}={self.token.decode()}; Path=/; HttpOnly; SameSite=Strict"
        return value.encode()


def _query_token(scope: Scope) -> bytes | None:
    query = scope.get("query_string", b"").decode("latin-1")
    for key, value in parse_qsl(query):
        if key == TOKEN_PARAMETER:
            return value.encode()
    return None


def _cookie_token(header: bytes, name: str) -> bytes | None:
    cookies: SimpleCookie = SimpleCookie()
    try:
        cookies.load(header.decode("latin-1"))
    except CookieError:  # a malformed Cookie header is no token
        return None
    morsel = cookies.get(name)
    return None if morsel is None else morsel.value.encode()


async def _refuse(send: Send, status: int, reason: str) -> None:
    body = (reason + "\n").encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *SECURITY_HEADERS,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
