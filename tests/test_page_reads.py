"""What the pages read, on a store the real collector filled: a deep link without its account
still finds its consumer, and the Pins page reads pin history again after each write to the store
and only then (its cache keys on what repeats). tests/test_consumer_page_reads.py holds the one-consumer
reads."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

from jetwatch.core.clock import utcnow
from jetwatch.dashboard import data, ui
from jetwatch.dashboard.text import pin_tail
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


def test_the_pins_page_reads_pin_history_again_after_each_write_to_the_store_and_only_then(
        filled_db, app_env, tmp_path, monkeypatch):
    """Refreshes with nothing written since are served from the cache; a pin event written between
    two collector cycles (no cycle since) shows on the next refresh, read again, as written."""
    db = _copy(filled_db, tmp_path)
    store = Store(db)
    monkeypatch.setattr(ui, "PIN_HISTORY_EVERY", 1e12)  # only writes move the key in this test
    reads = []
    read = data.pin_history
    monkeypatch.setattr(data, "pin_history", lambda *a, **k: reads.append(1) or read(*a, **k))
    app_env(db)
    at = run_app("views/pins.py")
    before, read_before = frame(at, "Seen by"), len(reads)
    assert read_before >= 1

    at.run()
    assert len(reads) == read_before and len(frame(at, "Seen by")) == len(before), "nothing written: a cache hit"

    now = utcnow()
    account = store.query("consumer_latest_one", {"account": None, "stream": STREAM, "consumer": CONSUMER})["account"][0]
    store.write(lambda con: con.execute(
        "INSERT INTO inferred_pin_events VALUES ('cache-test', ?, ?, ?, ?, ?, 'jobs', 'pinned', 'CACHETESTPIN', NULL, 'test')",
        [now, now, account, STREAM, CONSUMER]))
    at.run()
    after = frame(at, "Seen by")
    assert len(reads) == read_before + 1, "a write: the page reads the pin history again"
    assert len(after) == len(before) + 1 and (after["Seen by"] == "inferred").sum() == (before["Seen by"] == "inferred").sum() + 1
    assert pin_tail("CACHETESTPIN") in set(after["Pin id (tail)"]), "the new pin, as written"

    at.run()
    assert len(reads) == read_before + 1, "nothing written since: a cache hit again"
