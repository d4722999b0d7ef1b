"""Who may see the dashboard, and what every response carries (`bot.dashboard.web` serves it).

With DASHBOARD_TOKEN every page and API needs it: `Authorization: Bearer <token>` or the
cookie the login form sets (HttpOnly, SameSite=Strict; its value is an HMAC of the token, not
the token). `/metrics`, `/healthz`, `/login` and `/static` stay open: they hold no transcript
text, and the screen-note ingest checks its own token. Wrong tokens are counted per client
(`bot.dashboard.guard.LoginThrottle`), logged, and throttled with a 429. Every response gets a
strict CSP (scripts and styles only from /static, no inline code) and the other security headers.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web

from bot.dashboard.guard import LoginThrottle
from bot.dashboard.view import login_page
from pipeline.events import DashboardLoginRefused

log = structlog.get_logger("longcall.dashboard")

COOKIE_NAME = "longcall_dashboard"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
_OPEN_PATHS = ("/healthz", "/metrics", "/login", "/static/", "/favicon.ico")


def cookie_value(token: str) -> str:
    return hmac.new(token.encode(), b"longcall-dashboard-cookie-v1", hashlib.sha256).hexdigest()


def client_address(request: web.Request) -> str:
    """Who is trying: the peer address (a proxy in front makes every visitor one client; the
    throttle then protects the token, not each visitor: docs/dashboard.md)."""
    return request.remote or "?"


def _log_refusal(request: web.Request, via: str, verdict_failures: int, retry_after_s: int, reason: str) -> None:
    event = DashboardLoginRefused(client=client_address(request), via=via, reason=reason, failures=verdict_failures,
                                  retry_after_s=retry_after_s)
    log.warning(event.name, **event.payload())


def throttled_response(retry_after_s: int, *, api: bool) -> web.Response:
    text = f"too many wrong tokens from this address; try again in {retry_after_s} s"
    headers = {"Retry-After": str(retry_after_s)}
    if api:
        return web.json_response({"error": "too_many_attempts", "retry_after_s": retry_after_s}, status=429,
                                 headers=headers)
    return web.Response(text=login_page(text), content_type="text/html", status=429, headers=headers)


def count_wrong_token(request: web.Request, throttle: LoginThrottle, via: str) -> web.Response | None:
    """Count a wrong token; log it, and log once when the client becomes throttled. Returns the
    429 to send when it just became throttled (None: answer as a plain wrong token)."""
    verdict = throttle.failed(client_address(request))
    _log_refusal(request, via, verdict.failures, 0, "wrong_token")
    if verdict.allowed:
        return None
    _log_refusal(request, via, verdict.failures, verdict.retry_after_s, "throttled")
    return throttled_response(verdict.retry_after_s, api=request.path.startswith("/api/"))


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """On every response, errors and static files included (`on_response_prepare`)."""
    for key, value in _SECURITY_HEADERS.items():
        response.headers.setdefault(key, value)
    if not request.path.startswith("/static/"):
        response.headers.setdefault("Cache-Control", "no-store")


def _is_note_ingest(request: web.Request) -> bool:
    """The screen-note ingest (bot/notes/api.py) checks its own bearer token, NOTES_INGEST_TOKEN:
    a capture tool never holds the dashboard's token, so the wall lets it through."""
    return request.method == "POST" and request.path.startswith("/api/sessions/") and request.path.endswith("/notes")


def token_wall(token: str, throttle: LoginThrottle) -> Any:
    expected_cookie = cookie_value(token)

    @web.middleware
    async def wall(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.path.startswith(_OPEN_PATHS) or _is_note_ingest(request):
            return await handler(request)
        header = request.headers.get("Authorization", "")
        cookie = request.cookies.get(COOKIE_NAME, "")
        if header.startswith("Bearer "):
            verdict = throttle.check(client_address(request))
            if not verdict.allowed:  # refused unchecked: no more guesses from this address for now
                return throttled_response(verdict.retry_after_s, api=request.path.startswith("/api/"))
            if hmac.compare_digest(header[7:].strip().encode(), token.encode()):
                return await handler(request)
            if (throttled := count_wrong_token(request, throttle, "bearer")) is not None:
                return throttled
        if cookie and hmac.compare_digest(cookie.encode(), expected_cookie.encode()):
            return await handler(request)
        if request.path.startswith("/api/"):
            return web.json_response({"error": "unauthorized"}, status=401,
                                     headers={"WWW-Authenticate": 'Bearer realm="longcall"'})
        return web.Response(text=login_page(next_url=request.path_qs), content_type="text/html", status=401,
                            headers={"WWW-Authenticate": 'Bearer realm="longcall"'})

    return wall
