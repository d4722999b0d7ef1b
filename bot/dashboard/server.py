"""`longcall dashboard`: the operator dashboard over every session in the store, no Discord token.

Binds loopback unless told otherwise, and refuses a non-loopback address without
DASHBOARD_TOKEN (`bot.dashboard.web.check_bind`). Stops on Ctrl-C / SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys

from bot.dashboard.web import DashboardBindError, bound_port, check_bind, create_dashboard_app, start_dashboard
from bot.runtime import dashboard_config, open_store
from bot.settings import Settings


async def serve_dashboard(settings: Settings, host: str, port: int) -> int:
    try:
        check_bind(host, settings.dashboard_token)
    except DashboardBindError as err:
        print(f"longcall: {err}", file=sys.stderr)
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    async with open_store(settings) as store:
        app = create_dashboard_app(store, dashboard_config(settings))
        try:
            runner = await start_dashboard(app, host, port)
        except OSError as err:
            print(f"longcall: cannot listen on {host}:{port} ({err.strerror}); try --port", file=sys.stderr)
            return 2
        try:
            shown = f"[{host}]" if ":" in host else host
            token_note = " (token required)" if settings.dashboard_token else ""
            print(f"longcall dashboard: http://{shown}:{bound_port(runner)}/{token_note}  (Ctrl-C stops it)",
                  flush=True)
            await stop.wait()
        finally:
            await runner.cleanup()
    return 0
