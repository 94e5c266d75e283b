"""The store's schema is upgraded in numbered steps, in one transaction; newer files are refused."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pytest

from jetwatch import sql
from jetwatch.collectors.consumer_state import SAMPLE_COLUMNS
from jetwatch.store import writes
from jetwatch.store.database import Store, StoreError, StoreTooNew
from tests.helpers import rows

V1_SCHEMA = Path(__file__).parent / "fixtures" / "schema_v1.sql"  # sql/schema.sql of the first release
T0 = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)


def v1_store(path: str) -> None:
    """A store as the first release left it: its schema file, version 1 stamped, some history."""
    con = duckdb.connect(path)
    con.execute(V1_SCHEMA.read_text())
    con.execute("INSERT INTO schema_version VALUES (1, ?)", [T0])
    con.execute("INSERT INTO samples (ts, account, stream, consumer, num_pending) VALUES (?, 'A', 'S', 'C', 7)", [T0])
    con.execute("INSERT INTO advisories (id, ts, received_at, kind, subject, account, stream, consumer, group_name, "
                "pinned_id, raw) VALUES ('adv1', ?, ?, 'consumer_group_pinned', 'x', 'A', 'S', 'C', 'g', 'pin-1', '{}')",
                [T0, T0])
    con.execute("INSERT INTO audit VALUES (?, 'ops', 'cli', 'unpin', 'A', 'S', 'C', 'g', '{}', 'ok', '{}')", [T0])
    con.close()


def tables(store: Store) -> dict[str, list[str]]:
    return store.read(lambda con: {
        t: [c[0] for c in con.execute(f'DESCRIBE "{t}"').fetchall()]
        for (t,) in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()})


def test_migrations_are_numbered_without_gaps_and_the_version_is_the_last():
    numbers = [m.number for m in sql.migrations()]
    assert numbers == list(range(1, len(numbers) + 1))
    assert sql.schema_version() == numbers[-1]


def test_a_store_made_by_the_first_release_is_upgraded_and_keeps_its_history(db_path):
    v1_store(db_path)
    store = Store(db_path)
    store.migrate()
    assert rows(store, "SELECT max(version) FROM schema_version")[0][0] == sql.schema_version()
    assert rows(store, "SELECT num_pending FROM samples") == [(7,)]
    assert rows(store, "SELECT event, pinned_id FROM pin_events") == [("pinned", "pin-1")]
    assert rows(store, "SELECT actor, action FROM audit")[0] == ("ops", "unpin")


def test_an_upgraded_store_has_the_same_tables_as_a_new_one(db_path, tmp_path):
    v1_store(db_path)
    upgraded = Store(db_path)
    upgraded.migrate()
    fresh = Store(str(tmp_path / "fresh.duckdb"))
    fresh.migrate()
    assert tables(upgraded) == tables(fresh)


def test_opening_a_store_twice_applies_nothing_twice(db_path):
    Store(db_path).migrate()
    Store(db_path).migrate()
    versions = rows(Store(db_path), "SELECT version FROM schema_version ORDER BY version")
    assert [v for (v,) in versions] == list(range(1, sql.schema_version() + 1))


def test_a_store_newer_than_the_code_is_refused_in_words_and_left_alone(db_path):
    Store(db_path).migrate()
    con = duckdb.connect(db_path)
    con.execute("INSERT INTO schema_version VALUES (999, now())")
    con.close()
    with pytest.raises(StoreTooNew, match="schema version 999, newer than this jetwatch knows"):
        Store(db_path).migrate()
    assert rows(Store(db_path), "SELECT max(version) FROM schema_version")[0][0] == 999


def test_a_running_writer_whose_store_a_newer_release_upgraded_writes_nothing_and_says_so(db_path):
    running = Store(db_path)
    running.write(lambda con: con.execute("INSERT INTO audit (ts, actor, origin, action, stream, consumer, outcome) "
                                          "VALUES (now(), 'old', 'test', 'unpin', 'S', 'C', 'ok')"))
    newer = duckdb.connect(db_path)  # what a newer release's first write does to the file
    newer.execute("ALTER TABLE audit ADD COLUMN added_by_a_newer_release VARCHAR")
    newer.execute("INSERT INTO schema_version VALUES (?, now())", [sql.schema_version() + 1])
    newer.close()
    with pytest.raises(StoreTooNew, match=r"upgraded to schema version \d+ by a newer jetwatch while this one"):
        running.write(lambda con: con.execute("INSERT INTO audit (ts, actor, origin, action, stream, consumer, outcome) "
                                              "VALUES (now(), 'old', 'test', 'unpin', 'S', 'C', 'ok')"))
    assert rows(Store(db_path, lock_timeout=5), "SELECT count(*) FROM audit")[0][0] == 1


def test_a_failing_step_rolls_back_every_step_of_the_upgrade(db_path, monkeypatch):
    v1_store(db_path)
    before = tables(Store(db_path))
    good = sql.Migration(2, "add_a_table", "CREATE TABLE added_by_step_two (x INTEGER);")
    bad = sql.Migration(3, "broken", "ALTER TABLE no_such_table ADD COLUMN y INTEGER;")
    first = sql.migrations()[0]
    monkeypatch.setattr(sql, "migrations", lambda: (first, good, bad))
    with pytest.raises(StoreError, match=r"failed at step 3 \(broken\).*Nothing was changed"):
        Store(db_path).migrate()
    assert tables(Store(db_path)) == before
    assert rows(Store(db_path), "SELECT max(version) FROM schema_version")[0][0] == 1


def test_the_live_state_a_store_kept_as_a_table_is_shown_until_the_next_cycle_replaces_it(db_path):
    """Migration 9 turns the table consumer_current into a view over the current cycle's samples:
    the rows the table held stay the live state until a cycle of their account is written."""
    con = duckdb.connect(db_path)
    con.execute("SET TimeZone = 'UTC'")
    con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL, applied_at TIMESTAMPTZ NOT NULL)")
    for step in sql.migrations()[:8]:
        con.execute(step.text)
        con.execute("INSERT INTO schema_version VALUES (?, ?)", [step.number, T0])
    con.execute("INSERT INTO consumer_current (ts, account, stream, consumer, num_pending) VALUES "
                "(?, 'A', 'S', 'old', 7), (?, 'B', 'S', 'other', 9)", [T0, T0])
    con.close()
    store = Store(db_path)
    store.migrate()
    live = "SELECT account, consumer, num_pending FROM consumer_current ORDER BY account"
    assert rows(store, live) == [("A", "old", 7), ("B", "other", 9)]
    cycle = {c: [None] for c in SAMPLE_COLUMNS}
    cycle.update(ts=["2026-11-22T12:00:00Z"], account=["A"], stream=["S"], consumer=["new"], num_pending=[1],
                 paused=[False])
    store.write(lambda con: writes.write_samples(con, ["A"], cycle))
    assert rows(store, live) == [("A", "new", 1), ("B", "other", 9)]
