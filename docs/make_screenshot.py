"""Takes the README's dashboard screenshot (docs/img/dashboard.png) with the browser tests' rig:
the bundled gaming night replayed into a private Redis up to turn 300 (tests/support/dashboard_rig.py),
the dashboard served over it, and Debian's headless Chromium through Selenium, kept off the network
(apt-get install chromium chromium-driver). The PNG is reduced to a 128-colour palette to stay small.

    .venv/bin/python docs/make_screenshot.py      # or: make screenshot
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import structlog  # noqa: E402
from PIL import Image  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402

from bot.dashboard.config import DashboardConfig  # noqa: E402
from bot.dashboard.web import bound_port, create_dashboard_app, start_dashboard  # noqa: E402
from pipeline.adapters.redis_server import PrivateRedisServer  # noqa: E402
from pipeline.adapters.redis_store import RedisSessionStore  # noqa: E402
from tests.support.dashboard_rig import GAMING_NIGHT, STOP_AT, replay_into  # noqa: E402

OUT = ROOT / "docs" / "img" / "dashboard.png"
WIDTH, HEIGHT = 1280, 1300
SESSION = "gaming-night"


def shoot(url: str, path: Path) -> None:
    options = webdriver.ChromeOptions()
    options.binary_location = str(shutil.which("chromium") or shutil.which("chromium-browser"))
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                f"--window-size={WIDTH},{HEIGHT}", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=str(shutil.which("chromedriver"))), options=options)
    try:
        driver.set_page_load_timeout(30)
        driver.get(url)
        driver.save_screenshot(str(path))
    finally:
        driver.quit()


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with PrivateRedisServer() as server, tempfile.TemporaryDirectory() as tmp:
        store = RedisSessionStore.from_url(server.url)
        runner = await start_dashboard(create_dashboard_app(store, DashboardConfig()), "127.0.0.1", 0)
        try:
            await replay_into(store, GAMING_NIGHT, Path(tmp), stop_at_turn=STOP_AT, session_id=SESSION)
            raw = Path(tmp) / "raw.png"
            url = f"http://127.0.0.1:{bound_port(runner)}/sessions/{SESSION}"
            await asyncio.to_thread(shoot, url, raw)  # Selenium blocks; the dashboard serves on this loop
            with Image.open(raw) as image:
                small = image.convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT)
                OUT.parent.mkdir(parents=True, exist_ok=True)
                small.save(OUT, optimize=True)
        finally:
            await runner.cleanup()
            await store.aclose()
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size // 1024} KB)", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
