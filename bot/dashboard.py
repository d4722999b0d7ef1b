"""The operator's dashboard: a small aiohttp app over the live sessions, events and metrics.

Routes: `/` (server-rendered HTML, refreshes itself every 5 s), `/api/sessions`,
`/api/sessions/{session_id}/events`, `/metrics` (Prometheus text) and `/healthz`.

The page shows conversation summaries and live notes, so it binds to loopback by default
(DASHBOARD_HOST=127.0.0.1); put an authenticating proxy in front before exposing it. Every
piece of text reaches the page through `html.escape` -- transcripts are user input -- and a
Content-Security-Policy forbids scripts outright as a second line of defence.

Everything here runs on the bot's event loop: `RecentEvents` and the metrics sink are fed
by `EventEmitter.emit` on the loop, and the handlers read them there, so no locks.
"""

from __future__ import annotations

import functools
import html
import json
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog
from aiohttp import web

from pipeline.events import COMPACTION_SKIPPED, CONTEXT_RECALL
from pipeline.metrics import CONTENT_TYPE, CompactionMetrics
from pipeline.planning import recent_start
from pipeline.session import ConversationSession

log = structlog.get_logger("longcall.dashboard")

COMPACTION_EVENT_PREFIX = "voice_context_compaction_"
EVENTS_PER_SESSION_ON_PAGE = 20
_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
# Event fields are plain JSON values by contract; `default=str` keeps an odd one from
# turning a dashboard request into a 500.
_json_dumps = functools.partial(json.dumps, default=str)
_PAGE_STYLE = (
    "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}"
    "section{border:1px solid #ccc;border-radius:6px;padding:0 1em 1em;margin-bottom:1.5em}"
    "table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:2px 8px;text-align:left;"
    "vertical-align:top}pre{white-space:pre-wrap;background:#f6f6f6;padding:.6em;max-width:80em}"
    ".bad{color:#b00}.muted{color:#777}"
)


class SessionView(Protocol):
    """What the dashboard reads about one live session."""

    @property
    def guild_id(self) -> str: ...
    @property
    def session_id(self) -> str: ...
    @property
    def session(self) -> ConversationSession: ...
    @property
    def started_at(self) -> float: ...  # wall-clock epoch seconds
    @property
    def channel_name(self) -> str | None: ...


class SessionRegistry(Protocol):
    def sessions(self) -> Mapping[str, SessionView]: ...


class RecentEvents:
    """A bounded ring buffer of events, itself an event sink: `emitter.add_sink(recent)`.

    Routine `below_threshold` skips (one per turn) are not kept by default, so they cannot
    push the interesting events out of the buffer; the metrics still count them.
    """

    __slots__ = ("_clock", "_events", "_ignored_skip_reasons")

    def __init__(
        self,
        maxlen: int = 500,
        *,
        ignored_skip_reasons: Collection[str] = ("below_threshold",),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._events: deque[dict[str, Any]] = deque(maxlen=maxlen)
        self._ignored_skip_reasons = frozenset(ignored_skip_reasons)
        self._clock = clock

    def __call__(self, event: Mapping[str, Any]) -> None:
        if event.get("event") == COMPACTION_SKIPPED and event.get("reason") in self._ignored_skip_reasons:
            return
        self._events.append({**event, "received_at": self._clock()})

    def __len__(self) -> int:
        return len(self._events)

    def list(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """Events oldest first (copies), optionally only one session's."""
        return [dict(e) for e in self._events if session_id is None or e.get("session_id") == session_id]


def session_summary(view: SessionView, *, now: float) -> dict[str, Any]:
    """The JSON shape of one session for `/api/sessions` (also what the page renders)."""
    session = view.session
    snap = session.snapshot()
    state = session.compactor.state
    start = recent_start(snap.cursor, snap.total_turns, session.policy)  # the planner's own arithmetic
    return {
        "guild_id": view.guild_id,
        "session_id": view.session_id,
        "channel_name": view.channel_name,
        "started_at": view.started_at,
        "uptime_s": round(max(0.0, now - view.started_at), 1),
        "cursor": snap.cursor,
        "covered_through_turn": snap.covered_through_turn,
        "total_turns": snap.total_turns,
        "backlog": max(0, snap.total_turns - snap.cursor),
        "eligible": max(0, start - snap.cursor),
        "window_turns": len(snap.turns),
        "in_flight": snap.in_flight,
        "failures": state.failures,
        "next_retry_at": state.next_retry_at,
        "notes_dropped": state.notes_dropped,
        "unsynced_turns": session.unsynced_count,
        "summary_chars": len(snap.summary),
        "summary": snap.summary,
        "live_notes": [
            {"at": n.at, "by": n.by, "text": n.text, "why": n.why, "source": n.source} for n in snap.live_notes
        ],
    }


class _Dashboard:
    __slots__ = ("_clock", "_config", "_metrics", "_recent", "_registry")

    def __init__(
        self,
        registry: SessionRegistry,
        metrics: CompactionMetrics,
        recent: RecentEvents,
        config: Mapping[str, Any] | None,
        clock: Callable[[], float],
    ) -> None:
        self._registry = registry
        self._metrics = metrics
        self._recent = recent
        self._config = config
        self._clock = clock

    def _views(self) -> list[SessionView]:
        return sorted(self._registry.sessions().values(), key=lambda v: (v.started_at, v.session_id))

    async def api_sessions(self, request: web.Request) -> web.Response:
        now = self._clock()
        return web.json_response(
            {"sessions": [session_summary(v, now=now) for v in self._views()]}, dumps=_json_dumps
        )

    async def api_events(self, request: web.Request) -> web.Response:
        session_id = request.match_info["session_id"]
        events = self._recent.list(session_id)
        known = any(v.session_id == session_id for v in self._views())
        if not events and not known:
            raise web.HTTPNotFound(text=f"no session {session_id!r}")
        return web.json_response({"session_id": session_id, "events": events}, dumps=_json_dumps)

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self._metrics.render().encode(), headers={"Content-Type": CONTENT_TYPE})

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "sessions": len(self._registry.sessions())})

    async def index(self, request: web.Request) -> web.Response:
        now = self._clock()
        body = [f"<h1>longcall</h1><p class=muted>{_e(_iso(now))} &middot; refreshes every 5 s</p>"]
        views = self._views()
        if not views:
            body.append("<p>No live sessions.</p>")
        for view in views:
            body.append(self._session_html(session_summary(view, now=now), self._recent.list(view.session_id)))
        if self._config is not None:
            rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in self._config.items())
            body.append(f"<details><summary>Settings (secrets redacted)</summary><table>{rows}</table></details>")
        page = (
            '<!doctype html><html lang=en><head><meta charset=utf-8><meta http-equiv="refresh" content="5">'
            f"<title>longcall dashboard</title><style>{_PAGE_STYLE}</style></head><body>{''.join(body)}</body></html>"
        )
        return web.Response(text=page, content_type="text/html", headers=_SECURITY_HEADERS)

    def _session_html(self, s: Mapping[str, Any], events: list[dict[str, Any]]) -> str:
        title = f"Guild {s['guild_id']}" + (f" — #{s['channel_name']}" if s["channel_name"] else "")
        stats = [
            ("session", s["session_id"]),
            ("started", f"{_iso(s['started_at'])} (up {s['uptime_s']:.0f} s)"),
            ("cursor", s["cursor"]),
            ("covered through turn", s["covered_through_turn"]),
            ("total turns", s["total_turns"]),
            ("backlog (total − cursor)", s["backlog"]),
            ("waiting to fold", s["eligible"]),
            ("fold in flight", "yes" if s["in_flight"] else "no"),
            ("consecutive failures", s["failures"]),
            ("summary length", f"{s['summary_chars']} chars"),
        ]
        stat_rows = "".join(
            f"<tr><th>{_e(k)}</th><td{' class=bad' if k == 'consecutive failures' and v else ''}>{_e(v)}</td></tr>"
            for k, v in stats
        )
        summary = f"<pre>{_e(s['summary'])}</pre>" if s["summary"] else "<p class=muted>No summary yet.</p>"
        notes = "".join(
            f"<li><b>{_e(n['by'])}</b>: {_e(n['text'])}" + (f" <i>({_e(n['why'])})</i>" if n["why"] else "") + "</li>"
            for n in s["live_notes"]
        )
        compaction = [
            e for e in events
            if str(e.get("event", "")).startswith(COMPACTION_EVENT_PREFIX) or e.get("event") == CONTEXT_RECALL
        ]
        event_rows = "".join(
            f"<tr><td>{_e(_iso(e['received_at']))}</td><td>{_e(str(e['event']).removeprefix(COMPACTION_EVENT_PREFIX))}"
            f"</td><td>{_e(_details(e))}</td></tr>"
            for e in reversed(compaction[-EVENTS_PER_SESSION_ON_PAGE:])
        )
        return (
            f"<section><h2>{_e(title)}</h2><table>{stat_rows}</table>"
            f"<h3>Summary</h3>{summary}"
            f"<h3>Live notes</h3>{f'<ul>{notes}</ul>' if notes else '<p class=muted>None.</p>'}"
            f"<h3>Last {EVENTS_PER_SESSION_ON_PAGE} compaction and recall events</h3>"
            + (
                f"<table><tr><th>time</th><th>event</th><th>fields</th></tr>{event_rows}</table>"
                if event_rows
                else "<p class=muted>None yet.</p>"
            )
            + "</section>"
        )


_IDENTITY_FIELDS = frozenset({"event", "guild_id", "session_id", "source", "received_at"})


# A recall event's full hit list is for the JSON API; the page shows what was recalled.
_RECALL_FIELDS = ("builder", "seqs", "chars", "latency_ms", "index_size", "dense")


def _details(event: Mapping[str, Any]) -> str:
    if event.get("event") == CONTEXT_RECALL:
        return " ".join(f"{k}={event[k]}" for k in _RECALL_FIELDS if k in event)
    return " ".join(f"{k}={v}" for k, v in event.items() if k not in _IDENTITY_FIELDS)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def create_dashboard_app(
    registry: SessionRegistry,
    metrics: CompactionMetrics,
    recent_events: RecentEvents,
    *,
    config: Mapping[str, Any] | None = None,
    clock: Callable[[], float] = time.time,
) -> web.Application:
    """Build the dashboard app. `config`, if given, must already be redacted (`Settings.redacted()`)."""
    dashboard = _Dashboard(registry, metrics, recent_events, config, clock)
    app = web.Application()
    app.router.add_get("/", dashboard.index)
    app.router.add_get("/api/sessions", dashboard.api_sessions)
    app.router.add_get("/api/sessions/{session_id}/events", dashboard.api_events)
    app.router.add_get("/metrics", dashboard.metrics)
    app.router.add_get("/healthz", dashboard.healthz)
    return app


async def start_dashboard(app: web.Application, host: str, port: int) -> web.AppRunner:
    """Serve `app` on host:port; the caller owns the runner and calls `await runner.cleanup()`.

    The access log is off: the page refreshes every 5 s and Prometheus scrapes /metrics, which
    would otherwise drown the event log.
    """
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    log.info("dashboard_started", host=host, port=port, loopback_only=host in {"127.0.0.1", "::1", "localhost"})
    return runner
