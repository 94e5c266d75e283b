"""A silenced consumer on the Fleet at 1280x800 in headless Chromium: its verdict, the Silenced
column beside it and the line above the table naming the silence are drawn in view, without
scrolling. AppTest reads a table's values; only a browser shows what the grid draws in view."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from jetwatch.core.embedded_server import free_port
from tests.browser import CHROMIUM, http_ok, launch_chromium, no_errors, stop
from tests.helpers import (
    clean_env,
    judged,
    wait_until,
)
from tests.test_browser_fleet_layout import LAPTOP, drawn_grid

pytestmark = [pytest.mark.browser]


def test_a_silence_is_drawn_beside_its_verdict_on_the_fleet_at_1280(nats_server, db_path, uid, run, tmp_path):
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail("Chromium is not installed: run `make test` (it installs Debian's chromium package)")
    stream = f"{uid}_SHH"

    run(judged(nats_server.url, db_path, stream, uid,
               {name: ({"filter_subject": f"{uid}.{name}"}, 2) for name in ("idle", "quiet")},
               {"idle": "NO_PULLERS", "quiet": "NO_PULLERS"}))
    done = subprocess.run([sys.executable, "-m", "jetwatch.cli", "silence", stream, "idle", "--for", "2h", "--note",
                           "draining by hand, INC-9", "--yes", "--actor", "oncall", "--db", db_path],
                          capture_output=True, text=True, timeout=120, env=clean_env())
    assert done.returncode == 0, done.stdout + done.stderr

    port = free_port()
    with open(tmp_path / "dashboard.log", "wb") as log:
        dashboard = subprocess.Popen(
            [sys.executable, "-m", "jetwatch.cli", "dashboard", "--db", db_path, "--port", str(port), "--refresh",
             "1s", "--stale-after", "1h"], env=clean_env(), stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: http_ok(base + "/_stcore/health"), timeout=60, message="dashboard health endpoint")
        with sync_playwright() as p:
            browser = launch_chromium(p)
            try:
                page = browser.new_page(viewport=LAPTOP)
                page.goto(base + "/")
                line = page.get_by_text("Alerts held back for 1 consumer").filter(visible=True).first
                line.wait_for(timeout=30_000)
                assert "draining by hand, INC-9" in line.inner_text() and "silenced by oncall" in line.inner_text()
                box = line.bounding_box()
                assert box is not None and box["y"] + box["height"] <= LAPTOP["height"], box

                def drawn() -> dict[str, dict[str, str]] | None:
                    headers, body = drawn_grid(page)
                    cells = {r.get("Consumer", ""): r for r in (dict(zip(headers, b)) for b in body)}
                    return cells if "Silenced" in headers and len(cells) == 2 else None

                cells = wait_until(drawn, timeout=30, message="the grid drew its rows with the Silenced column")
                idle = next(v for k, v in cells.items() if "idle" in k)
                quiet = next(v for k, v in cells.items() if "quiet" in k)
                assert idle["Verdict"] == "NO_PULLERS" and idle["Silenced"].startswith("🔕 oncall, ")
                assert quiet["Verdict"] == "NO_PULLERS" and quiet["Silenced"] == ""
                assert page.evaluate("document.documentElement.scrollWidth") <= LAPTOP["width"]
                no_errors(page)
            finally:
                browser.close()
    finally:
        stop(dashboard)
