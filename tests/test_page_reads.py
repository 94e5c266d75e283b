"""What the pages read, on a store the real collector filled: a deep link without its account
still finds its consumer, and the Pins page reads pin history once per collector cycle (its cache
keys on what repeats). tests/test_consumer_page_reads.py holds the one-consumer reads."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

from jetwatch.core.clock import utcnow
from jetwatch.dashboard import data, ui
from jetwatch.store.database import Store
from tests.conftest import CONSUMER, STREAM
from tests.test_dashboard import frame, run_app


def _copy(db: str, to: Path) -> str:
    target = to / "copy.duckdb"
    shutil.copy(db, target)
    if Path(db + ".wal").exists():
        shutil.copy(db + ".wal", str(target) + ".wal")
    return str(target)


def test_an_unknown_account_in_a_deep_link_still_finds_the_consumers_pins_and_state(filled_db):
    store = Store(filled_db)
    until = utcnow()
    detail = data.consumer_detail(store, None, STREAM, CONSUMER, until - dt.timedelta(hours=1), until)
    assert len(detail.latest) == 1 and not detail.pins.empty


def test_the_pins_page_reads_pin_history_once_per_collector_cycle(filled_db, app_env, tmp_path, monkeypatch):
    """Refreshes between two collector cycles are served from the cache (an event written without
    a cycle is not read); the next cycle's time makes the page read again."""
    db = _copy(filled_db, tmp_path)
    store = Store(db)
    monkeypatch.setattr(ui, "PIN_HISTORY_EVERY", 1e12)  # only the cycle moves the key in this test
    app_env(db)
    at = run_app("views/pins.py")
    before = len(frame(at, "Seen by"))

    now = utcnow()
    account = store.query("consumer_latest_one", {"account": None, "stream": STREAM, "consumer": CONSUMER})["account"][0]
    store.write(lambda con: con.execute(
        "INSERT INTO inferred_pin_events VALUES ('cache-test', ?, ?, ?, ?, ?, 'jobs', 'pinned', 'CACHETESTPIN', NULL, 'test')",
        [now, now, account, STREAM, CONSUMER]))
    at.run()
    assert len(frame(at, "Seen by")) == before, "no new cycle: the page's refresh is a cache hit"

    store.write(lambda con: con.execute("UPDATE collector_status SET last_cycle_at = ?",
                                        [now + dt.timedelta(seconds=1)]))
    at.run()
    assert len(frame(at, "Seen by")) == before + 1, "a new cycle: the page reads the pin history again"
