"""The operator's dashboard: every session in the store, live or ended, as the model sees it.

Served by `longcall dashboard` (store only, no Discord token) and by `longcall run` (which
also knows its live sessions: their in-memory snapshot and unsynced turns). Routes:

- `/` the sessions; `/sessions/{id}` one session (`?above=N` turns above the horizon);
- `/sessions/{id}/live` the same page's body, `/api/sessions/{id}/version` a cheap change
  marker: `static/dashboard.js` polls the marker and swaps the body when it moves, so a
  running session updates without a reload;
- `/api/sessions`, `/api/sessions/{id}` (JSON, incl. the horizon), `/api/sessions/{id}/events`;
- `/metrics` (Prometheus text; only where a metrics sink exists, i.e. `longcall run`),
  `/healthz`, `/login`, `/static/*`.

Safe by default: callers bind loopback unless told otherwise, and refuse a non-loopback
address without DASHBOARD_TOKEN (`check_bind`). With a token every page and API needs it:
`Authorization: Bearer <token>` or the cookie the login form sets (HttpOnly, SameSite=Strict;
its value is an HMAC of the token, not the token). `/metrics`, `/healthz` and `/static` stay
open: they hold no transcript text. Every response carries a strict CSP (scripts and styles
only from /static, no inline code). Wrong tokens are throttled per client and logged (the token
wall, the cookie and the headers are `bot.dashboard.access`'s), the login
returns only to a local path, session ids are percent-encoded in links, and the heavy renders
are bounded and shared (`bot.dashboard.guard`); Redis not answering is a 503, never a 500.

The horizon is never re-derived here: the page calls the reply builder
(`pipeline.context.reply_context.build_reply_messages`) on the session's snapshot and draws the line
before the first turn it sends verbatim.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web

from bot.dashboard.access import (
    COOKIE_NAME,
    client_address,
    cookie_value,
    count_wrong_token,
    security_headers,
    throttled_response,
    token_wall,
)
from bot.dashboard.config import DashboardConfig, SessionRegistry, SessionView
from bot.dashboard.guard import Busy, LoginThrottle, RenderGate, safe_next, session_url
from bot.dashboard.panels import Tile, health_tiles, render_chart, render_tiles
from bot.dashboard.reader import SessionReader, latest_recall
from bot.dashboard.view import (
    OUTCOME_TEXT,
    Fold,
    ago,
    esc,
    iso,
    login_page,
    page,
    render_events,
    render_model_view,
    timeline,
    visible_seqs,
)
from pipeline.metrics import CONTENT_TYPE, CompactionMetrics
from pipeline.models import StoreUnavailable
from pipeline.ports import SessionStore
from pipeline.transcript.event_log import EVENT_LOG_MAX

log = structlog.get_logger("longcall.dashboard")

STATIC_DIR = Path(__file__).resolve().parent / "static"
DEFAULT_ABOVE = 30  # turns shown above the horizon (the issue asks for at least 20)
MAX_ABOVE = 5000


@dataclass(frozen=True, slots=True, kw_only=True)
class _Parts:
    """A session page's parts that do not depend on `?above=`: its head, tiles and chart, the
    events column, and the folds the transcript's badges name."""

    top: str
    events: str
    folds: tuple[Fold, ...]
    recall: tuple[tuple[int, ...], int | None]  # the latest reply's recalled seqs and chars


class _NoLiveSessions:
    def sessions(self) -> Mapping[str, SessionView]:
        return {}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class DashboardBindError(ValueError):
    """Refused: a non-loopback bind without a token."""


def check_bind(host: str, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise DashboardBindError(
            f"refusing to serve the dashboard on {host} without DASHBOARD_TOKEN: it shows what people said. "
            "Set DASHBOARD_TOKEN (16+ characters) or bind 127.0.0.1"
        )


@web.middleware
async def _store_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Redis not answering (or answering too slowly) and a full render queue are a 503 with
    `Retry-After`, never a 500 and a traceback."""
    try:
        return await handler(request)
    except StoreUnavailable:
        return _unavailable("Redis does not answer", 2, request)
    except Busy as busy:
        return _unavailable("the dashboard is busy", busy.retry_after_s, request)


def _unavailable(why: str, retry_after_s: int, request: web.Request) -> web.Response:
    headers = {"Retry-After": str(retry_after_s)}
    if request.path.startswith("/api/"):
        return web.json_response({"error": why, "retry_after_s": retry_after_s}, status=503, headers=headers)
    return web.Response(text=f"{why}; try again in {retry_after_s} s", status=503, headers=headers)




class Dashboard:
    """Reads sessions from the store (and live ones from the registry) and renders them."""

    def __init__(
        self,
        store: SessionStore,
        config: DashboardConfig,
        *,
        live: SessionRegistry | None = None,
        metrics: CompactionMetrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._config = config
        self._live = live or _NoLiveSessions()
        self._metrics = metrics
        self._clock = clock
        self._reader = SessionReader(store, config, self._live)
        self.throttle = LoginThrottle(clock)
        # The session page, its body and the JSON API are the heavy reads: bounded, shared by
        # the requests that want the same one at once, and kept while the session's version holds.
        self.gate: RenderGate[str] = RenderGate(clock)
        self.parts: RenderGate[_Parts] = RenderGate(clock)

    # -- handlers --------------------------------------------------------------------------------

    async def index(self, request: web.Request) -> web.Response:
        body = await self.gate.run("index", await self._index_version(), self._index_body)
        if "fragment" in request.query:
            return web.Response(text=body, content_type="text/html")
        return web.Response(text=page("sessions", body,
                                      poll={"fragment-url": "/?fragment=1", "version-url": "/api/version"}),
                            content_type="text/html")

    async def _index_version(self) -> str:
        try:
            ids = await self._reader.session_ids()
            parts = await asyncio.gather(*(self._reader.version(sid) for sid in ids))
        except StoreUnavailable:
            return "down"
        return hashlib.sha1(":".join([*ids, *parts]).encode(), usedforsecurity=False).hexdigest()[:16]

    async def _index_body(self) -> str:
        try:
            rows = await self._reader.session_rows()
        except StoreUnavailable:
            return '<section class="card"><p class="bad">Redis does not answer.</p></section>'
        now = self._clock()
        if not rows:
            return ('<section class="card"><h2>Sessions</h2><p>No sessions stored yet. Run <code>make demo</code> '
                    "or <code>longcall replay FILE</code>, or start the bot.</p></section>")
        body = []
        for r in rows:
            fold = r["last_fold"]
            fold_text = "—" if fold is None else (
                f'<span class="dot {esc(fold["shown"])}"></span>{esc(OUTCOME_TEXT.get(fold["shown"], fold["shown"]))}'
                + (f" · {esc(ago(now - fold['at']))}" if isinstance(fold.get("at"), int | float) else "")
            )
            body.append(
                f'<tr data-testid="session-row" data-session-id="{esc(r["session_id"])}">'
                f'<td><a href="{esc(session_url(r["session_id"]))}">{esc(r["title"])}</a>'
                f'<div class="muted small">{esc(" · ".join(x for x in (r["session_id"], r["source"]) if x))}'
                f'{" · <b class=livebadge>live</b>" if r["live"] else ""}</div></td>'
                f'<td>{esc(iso(r["started_at"]))}</td><td class="num">{r["total_turns"]}</td>'
                f'<td class="num">{r["cursor"]}</td><td class="num">{r["backlog"]}</td>'
                f'<td class="num">{r["summary_chars"]}</td><td>{fold_text}</td>'
                f'<td><span class="health {esc(r["health"])}">{esc(r["health_text"])}</span></td></tr>'
            )
        return (
            '<section class="card"><h2>Sessions</h2><table class="sessions" data-testid="sessions">'
            "<thead><tr><th>session</th><th>started</th><th>turns</th><th>cursor</th>"
            '<th title="turns not yet folded into the summary: total − cursor">backlog</th>'
            "<th>summary chars</th><th>last fold</th><th>health</th></tr></thead><tbody>"
            + "".join(body) + "</tbody></table>"
            '<p class="muted small"><b>cursor</b>: the first turn not yet folded into the summary. '
            "<b>backlog</b>: total − cursor, the turns the model still gets verbatim plus any waiting to fold "
            f"(normally about {self._config.policy.window + 1}; it grows when compaction falls behind).</p></section>"
        )

    def _session_id(self, request: web.Request) -> str:
        """The id from the path (percent-decoded by the router), or from `?id=` for an id the
        path cannot carry (`bot.dashboard.guard.session_url`)."""
        session_id = request.match_info["session_id"]
        if session_id == "-" and "id" in request.query:
            return request.query["id"]
        return session_id

    def _above(self, request: web.Request) -> int:
        try:
            return max(0, min(MAX_ABOVE, int(request.query.get("above", DEFAULT_ABOVE))))
        except ValueError:
            return DEFAULT_ABOVE

    async def _session_body(self, session_id: str, above: int, version: str) -> str:
        """The page's body: the parts that do not depend on `above` (read once per version and
        shared by every `above`), and what the model sees with `above` turns over the horizon."""
        parts = await self.parts.run(session_id, version, lambda: self._session_parts(session_id))
        view = await self._reader.model_view(session_id, above, parts.recall)
        return (
            parts.top
            + '<div class="columns"><div class="col-main"><h2 class="colhead">What the model sees now</h2>'
            + render_model_view(view, parts.folds, above_param=above, base_url=session_url(session_id))
            + '</div><div class="col-side">'
            + parts.events
            + "</div></div>"
        )

    async def _session_parts(self, session_id: str) -> _Parts:
        events = await self._store.load_events(session_id, EVENT_LOG_MAX)
        row = await self._reader.session_row(session_id, events)
        tl = timeline(events, row["started_at"])
        live = self._live.sessions().get(session_id)
        redis = await self._reader.redis_health(session_id)
        tiles: list[Tile] = health_tiles(
            events, redis=redis, live=None if live is None else {"unsynced_turns": live.session.unsynced_count}
        )
        stats = (
            f'<div class="stats" data-testid="stats"><span><b>{row["total_turns"]}</b> turns</span>'
            f'<span>cursor <b>{row["cursor"]}</b></span>'
            f'<span title="turns not yet folded: total − cursor">backlog <b>{row["backlog"]}</b></span>'
            f'<span title="turns outside the verbatim window, waiting for the next fold">waiting to fold '
            f'<b>{row["eligible"]}</b></span><span>summary <b>{row["summary_chars"]}</b> chars</span>'
            f'<span class="health {esc(row["health"])}">{esc(row["health_text"])}</span></div>'
        )
        header = (
            f'<section class="card head"><h2>{esc(row["title"])}'
            f'{" <b class=livebadge>live</b>" if row["live"] else ""}</h2>'
            f'<p class="muted small">{esc(" · ".join(x for x in (session_id, row["source"]) if x))}'
            f' · started {esc(iso(row["started_at"]))}'
            f"</p>{stats}</section>"
        )
        top = (header + f'<div class="tiles">{render_tiles(tiles)}</div>'
               + f'<section class="card"><h3>Compaction timeline</h3>{render_chart(tl)}</section>')
        return _Parts(top=top, events=render_events(events, row["started_at"]), folds=tuple(tl.folds),
                      recall=latest_recall(events))

    async def _body(self, session_id: str, above: int) -> str:
        """The session page's body, through the gate (one render per version, bounded)."""
        version = await self._reader.version(session_id)
        return await self.gate.run(("page", session_id, above), version,
                                   lambda: self._session_body(session_id, above, version))

    async def session_page(self, request: web.Request) -> web.Response:
        session_id = self._session_id(request)
        if not await self._reader.exists(session_id):
            raise web.HTTPNotFound(text=f"no session {session_id}")
        above = self._above(request)
        body = await self._body(session_id, above)
        live_url = session_url(session_id, "live")
        poll = {
            "fragment-url": f"{live_url}{'&' if '?' in live_url else '?'}above={above}",
            "version-url": session_url(session_id, "version", api=True),
        }
        return web.Response(text=page(session_id, body, poll=poll), content_type="text/html")

    async def session_fragment(self, request: web.Request) -> web.Response:
        session_id = self._session_id(request)
        if not await self._reader.exists(session_id):
            raise web.HTTPNotFound(text=f"no session {session_id}")
        return web.Response(text=await self._body(session_id, self._above(request)), content_type="text/html")

    async def api_version(self, request: web.Request) -> web.Response:
        if "session_id" not in request.match_info:
            return web.json_response({"version": await self._index_version()})
        return web.json_response({"version": await self._reader.version(self._session_id(request))})

    async def api_sessions(self, request: web.Request) -> web.Response:
        text = await self.gate.run("api-index", await self._index_version(), self._sessions_json)
        return web.Response(text=text, content_type="application/json")

    async def _sessions_json(self) -> str:
        return _dumps({"sessions": await self._reader.session_rows()})

    async def api_session(self, request: web.Request) -> web.Response:
        session_id = self._session_id(request)
        if not await self._reader.exists(session_id):
            raise web.HTTPNotFound(text=f"no session {session_id}")
        above = self._above(request)
        text = await self.gate.run(("api", session_id, above), await self._reader.version(session_id),
                                   lambda: self._api_session_json(session_id, above))
        return web.Response(text=text, content_type="application/json")

    async def _api_session_json(self, session_id: str, above: int) -> str:
        row = await self._reader.session_row(session_id)
        view = await self._reader.model_view(session_id, above)
        reply = view.reply
        seqs = visible_seqs(view)
        row["model_view"] = {
            "horizon_seq": next(iter(seqs), None),
            "verbatim_seqs": seqs,
            "shown_seqs": list(reply.shown_seqs) if reply else [],
            "pruned_seqs": list(reply.pruned_seqs) if reply else [],
            "current_seq": view.current.seq if view.current else None,
            "above_seqs": [t.seq for t in view.above],
            "summary": view.snapshot.summary,
        }
        return _dumps(row)

    async def api_events(self, request: web.Request) -> web.Response:
        session_id = self._session_id(request)
        if not await self._reader.exists(session_id):
            raise web.HTTPNotFound(text=f"no session {session_id}")
        text = await self.gate.run(("events", session_id), await self._reader.version(session_id),
                                   lambda: self._events_json(session_id))
        return web.Response(text=text, content_type="application/json")

    async def _events_json(self, session_id: str) -> str:
        events = await self._store.load_events(session_id, EVENT_LOG_MAX)
        return _dumps({"session_id": session_id, "events": events})

    async def metrics(self, request: web.Request) -> web.Response:
        assert self._metrics is not None
        redis = await self._reader.redis_health()
        self._metrics.set_store_health(up=bool(redis["up"]), ping_s=redis.get("ping_ms", 0.0) / 1000)
        return web.Response(body=self._metrics.render().encode(), headers={"Content-Type": CONTENT_TYPE})

    async def healthz(self, request: web.Request) -> web.Response:
        redis = await self._reader.redis_health()
        return web.json_response({"status": "ok" if redis["up"] else "degraded", "redis": redis["up"],
                                  "live_sessions": len(self._live.sessions())})

    async def login_form(self, request: web.Request) -> web.Response:
        return web.Response(text=login_page(next_url=safe_next(request.query.get("next"))),
                            content_type="text/html")

    async def login(self, request: web.Request) -> web.StreamResponse:
        token = self._config.token
        if token is not None:
            verdict = self.throttle.check(client_address(request))
            if not verdict.allowed:  # refused before the form is even read or the token compared
                return throttled_response(verdict.retry_after_s, api=False)
        form = await request.post()
        given = str(form.get("token", ""))
        next_url = safe_next(str(form.get("next", "/")))
        if token is None:
            return web.Response(status=303, headers={"Location": next_url})
        if not hmac.compare_digest(given.encode(), token.encode()):
            if (throttled := count_wrong_token(request, self.throttle, "form")) is not None:
                return throttled
            return web.Response(text=login_page("Wrong token.", next_url), content_type="text/html", status=401)
        response = web.Response(status=303, headers={"Location": next_url})
        response.set_cookie(COOKIE_NAME, cookie_value(token), httponly=True, samesite="Strict", path="/",
                            secure=request.secure, max_age=7 * 86400)
        return response


async def _no_content(request: web.Request) -> web.Response:
    return web.Response(status=204)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, default=str)


def create_dashboard_app(
    store: SessionStore,
    config: DashboardConfig | None = None,
    *,
    live: SessionRegistry | None = None,
    metrics: CompactionMetrics | None = None,
    clock: Callable[[], float] = time.time,
) -> web.Application:
    config = config or DashboardConfig()
    dashboard = Dashboard(store, config, live=live, metrics=metrics, clock=clock)
    middlewares: list[Any] = [_store_errors]
    if config.token:
        middlewares.insert(0, token_wall(config.token, dashboard.throttle))
    app = web.Application(middlewares=middlewares)
    app.on_response_prepare.append(security_headers)

    async def close_gate(_: web.Application) -> None:
        await dashboard.gate.aclose()
        await dashboard.parts.aclose()

    app.on_cleanup.append(close_gate)
    app.router.add_get("/", dashboard.index)
    app.router.add_get("/sessions/{session_id}", dashboard.session_page)
    app.router.add_get("/sessions/{session_id}/live", dashboard.session_fragment)
    app.router.add_get("/api/version", dashboard.api_version)
    app.router.add_get("/api/sessions", dashboard.api_sessions)
    app.router.add_get("/api/sessions/{session_id}", dashboard.api_session)
    app.router.add_get("/api/sessions/{session_id}/version", dashboard.api_version)
    app.router.add_get("/api/sessions/{session_id}/events", dashboard.api_events)
    if metrics is not None:
        app.router.add_get("/metrics", dashboard.metrics)
    app.router.add_get("/healthz", dashboard.healthz)
    app.router.add_get("/favicon.ico", _no_content)
    app.router.add_get("/login", dashboard.login_form)
    app.router.add_post("/login", dashboard.login)
    app.router.add_static("/static/", STATIC_DIR, append_version=False)
    return app


async def start_dashboard(app: web.Application, host: str, port: int) -> web.AppRunner:
    """Serve `app` on host:port; the caller owns the runner and calls `await runner.cleanup()`.

    The access log is off: the page polls every few seconds and Prometheus scrapes /metrics,
    which would otherwise drown the event log.
    """
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    log.info("dashboard_started", host=host, port=port, loopback_only=is_loopback(host))
    return runner


def bound_port(runner: web.AppRunner) -> int:
    """The port actually bound (for port 0)."""
    return int(runner.addresses[0][1])
