"""The store and the processes off the happy path: bad settings and bad store files are said in
words at startup, a reader never costs the collector a cycle, retention keeps what rollups do not
cover. Every case runs the real command or the real store."""

from __future__ import annotations

import asyncio
import datetime as dt
import errno
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import nats
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jetwatch import sql
from jetwatch.collectors.consumer_state import SAMPLE_COLUMNS
from jetwatch.core.clock import rfc3339, utcnow
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.core.settings import parse_instant
from jetwatch.dashboard.data import RAW_RANGE_LIMIT, consumer_detail, fleet, staleness
from jetwatch.pipeline.cli import default_since
from jetwatch.pipeline.export import export, prune_archive
from jetwatch.pipeline.load import load
from jetwatch.store import database, writes
from jetwatch.store.database import QueryTimeout, Store, StoreCorrupt, StoreFull, StoreUnwritable
from tests.helpers import (
    clean_env,
    collecting,
    collector_settings,
    eventually,
    make_consumer,
    make_stream,
    one_consumer_stream,
    publish,
    rows,
    wait_until,
)

REAL_STORE_ROWS = 100_000


def _jetwatch(argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    # An unreachable server: had a check passed, the command would wait for it and time out.
    return subprocess.run([sys.executable, "-m", "jetwatch.cli", *argv], capture_output=True, text=True, timeout=60,
                          env=clean_env(**(env or {})), cwd=cwd)


@pytest.mark.parametrize("argv,env,message", [
    (["collect", "--interval", "0"], {}, "flag --interval: 0s is out of range: allowed from 100ms to 1h"),
    (["collect", "--lock-timeout", "0"], {}, "flag --lock-timeout: 0s is out of range: allowed from 100ms to 1d"),
    (["dashboard", "--health-window", "0"], {}, "flag --health-window: 0s is out of range: allowed from 1s to 30d"),
    (["collect", "--capture-max-bytes", "0"], {}, "flag --capture-max-bytes: 0B is out of range: allowed at least 1MB"),
    (["collect", "--health-min-samples", "-1"], {}, "flag --health-min-samples: -1 is out of range: allowed at least 1"),
    (["collect", "--flapping-switches", "-3"], {}, "flag --flapping-switches: -3 is out of range: allowed at least 0"),
    (["collect", "--saturation-ratio", "1.5"], {}, "flag --saturation-ratio: 1.5 is out of range: allowed from 0.01 to 1"),
    (["dashboard", "--port", "70000"], {}, "flag --port: 70000 is out of range: allowed from 1 to 65535"),
    (["up", "--pipeline-every", "0"], {}, "flag --pipeline-every: 0s is out of range: allowed at least 1s"),
    (["collect"], {"JETWATCH_INTERVAL": "0"}, "environment variable JETWATCH_INTERVAL: 0s is out of range"),
    (["collect"], {"JETWATCH_REQUEST_TIMEOUT": "0"}, "JETWATCH_REQUEST_TIMEOUT: 0s is out of range: allowed from 100ms to 1h"),
    (["collect", "--saturation-ratio", "nan"], {}, "flag --saturation-ratio: nan is not a number: allowed from 0.01 to 1"),
    (["collect"], {"JETWATCH_REDELIVERY_SHARE": "inf"}, "JETWATCH_REDELIVERY_SHARE: inf is not a number: allowed from 0 to 1"),
    (["collect", "--metrics-address", "127.0.0.1:70000"], {},
     "flag --metrics-address: port 70000 is out of range: allowed from 0 to 65535 (HOST:PORT, such as 127.0.0.1:9464)"),
    (["collect", "--metrics-address", "127.0.0.1:http"], {}, "flag --metrics-address: '127.0.0.1:http' is not HOST:PORT"),
    (["dashboard", "--session-ttl", "0s"], {}, "flag --session-ttl: 0s is out of range: allowed from 1s to 30d"),
    (["dashboard", "--session-ttl", "100000d"], {}, "flag --session-ttl: 100000d is out of range: allowed from 1s to 30d"),
])
def test_a_setting_out_of_range_is_refused_at_startup_with_the_allowed_range(argv, env, message, tmp_path):
    done = _jetwatch([*argv, "--server", "nats://127.0.0.1:1", "--db", str(tmp_path / "j.duckdb")], env)
    assert done.returncode == 2, done
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def _directory(tmp: Path) -> Path:
    (tmp / "a-directory").mkdir()
    return tmp / "a-directory"


def _garbage(tmp: Path) -> Path:
    (tmp / "garbage.duckdb").write_bytes(bytes(range(256)) * 40)
    return tmp / "garbage.duckdb"


def _truncated(tmp: Path) -> Path:

    full = tmp / "full.duckdb"
    con = duckdb.connect(str(full))
    con.execute(f"CREATE TABLE t AS SELECT range AS i FROM range({REAL_STORE_ROWS})")
    con.close()
    cut = tmp / "truncated.duckdb"
    cut.write_bytes(full.read_bytes()[:4096])
    return cut


def _under_a_file(tmp: Path) -> Path:
    (tmp / "plain-file").write_text("x")
    return tmp / "plain-file" / "jetwatch.duckdb"


def _unwritable(tmp: Path) -> Path:
    return Path("/sys/jetwatch-test.duckdb")  # sysfs refuses new files, even to root


@pytest.mark.parametrize("command,make,message", [
    ("collect", _directory, "is a directory, not a store file: point --db at a file, such as"),
    ("collect", _garbage, "is not a readable DuckDB database: it is another kind of file, or truncated or damaged"),
    ("collect", _truncated, "is not a readable DuckDB database: it is another kind of file, or truncated or damaged"),
    ("collect", _under_a_file, "plain-file is a file, not a directory"),
    ("collect", _unwritable, "Cannot open the store /sys/jetwatch-test.duckdb: permission denied"),
    ("status", _directory, "is a directory, not a store file"),
    ("status", _truncated, "is not a readable DuckDB database"),
    ("dashboard", _directory, "is a directory, not a store file"),
    ("dashboard", _garbage, "is not a readable DuckDB database"),
], ids=["collect-directory", "collect-garbage", "collect-truncated", "collect-under-a-file", "collect-unwritable",
        "status-directory", "status-truncated", "dashboard-directory", "dashboard-garbage"])
def test_a_db_jetwatch_cannot_use_is_said_in_words_never_a_traceback(command, make, message, tmp_path):
    db = make(tmp_path)
    done = _jetwatch([command, "--db", str(db), *(["--server", "nats://127.0.0.1:1"] if command != "status" else [])])
    assert done.returncode == 1, done
    assert message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


# -- Writers first -------------------------------------------------------------------------------

HOLD = ("import duckdb, sys; c = duckdb.connect(sys.argv[1], read_only=True); print('held', flush=True); "
        "sys.stdin.read(); c.close()")


def _note_stamps(collector: Any, stamps: list[dt.datetime]) -> None:
    """Wrap the collector's real sampler so that the sample times of every cycle are noted."""
    sample = collector.sampler.collect

    async def recording() -> Any:
        batch = await sample()
        stamps.extend(parse_instant(t, utcnow()) for t in set(batch.samples["ts"]))
        return batch

    collector.sampler.collect = recording


def test_a_reader_holding_the_file_past_the_writer_timeout_costs_the_collector_no_cycle(nats_server, db_path, uid, run):
    """A viewer's read (here a process holding the file read-only) outlasts the collector's lock
    timeout several times over; once it lets go, every cycle sampled meanwhile is in the store."""
    stream = f"{uid}_HELD"
    store = Store(db_path, lock_timeout=30)

    async def main() -> list[dt.datetime]:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}held.>"])
        await make_consumer(api, stream, "c")
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.3, lock_timeout=1.0)
        stamps: list[dt.datetime] = []
        async with collecting(settings) as collector:
            _note_stamps(collector, stamps)
            holder = subprocess.Popen([sys.executable, "-c", HOLD, db_path], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE)
            try:
                assert holder.stdout.readline() == b"held\n"
                held_from = len(stamps)
                await eventually(lambda: len(stamps) >= held_from + 3, timeout=60,
                                 message="three cycles sampled while the file is held")
                await eventually(lambda: collector.last_error and "locked" in collector.last_error[0], timeout=30,
                                 message="the collector's error says the store is locked")
            finally:
                holder.stdin.close()
                holder.wait(10)
            done = collector.cycles
            await eventually(lambda: collector.cycles >= done + 2, timeout=30, message="two cycles after the release")
        await nc.close()
        return stamps

    stamps = run(main())
    stored = {r[0] for r in rows(store, "SELECT DISTINCT ts FROM samples WHERE stream = ?", [stream])}
    missing = [t for t in stamps if t not in stored]
    assert missing == [], f"{len(missing)} of {len(stamps)} cycles never reached the store"


HEAVY = "SELECT count(*) FROM range(200000) a, range(200000) b WHERE (a.range * 7 + b.range) % 1000003 = 5"


def test_a_long_read_gives_way_before_a_writer_gives_up(tmp_path):
    db = tmp_path / "j.duckdb"
    Store(db).migrate()
    reader, writer = Store(db, lock_timeout=3.0), Store(db, lock_timeout=3.0)
    started, outcome = threading.Event(), []

    def read() -> None:
        try:
            reader.read(lambda con: (started.set(), con.execute(HEAVY).fetchall()))
            outcome.append("finished")
        except QueryTimeout as exc:
            outcome.append(str(exc))

    thread = threading.Thread(target=read)
    thread.start()
    assert started.wait(10)
    writer.write(lambda con: con.execute("INSERT INTO store_meta VALUES ('writer', 'first')"))
    thread.join(30)
    assert outcome and "took longer than 1s and was stopped" in outcome[0]
    assert rows(writer, "SELECT value FROM store_meta WHERE key = 'writer'") == [("first",)]


def _old_raw_samples(store: Store, stream: str, start: dt.datetime, hours: int, every_s: int = 600) -> int:
    """Real sample rows, as the collector writes them (a cycle at a time: here all in one
    transaction, as a collector writes cycles it kept while the store was held), `hours` long from `start`."""
    times = [start + dt.timedelta(seconds=i) for i in range(0, hours * 3600, every_s)]

    def cycle(i: int, t: dt.datetime) -> dict[str, list[Any]]:
        cols: dict[str, list[Any]] = {c: [None] for c in SAMPLE_COLUMNS}
        cols.update(ts=[rfc3339(t)], account=["$G"], stream=[stream], consumer=["c"], num_pending=[i], paused=[False])
        return cols

    store.write(lambda con: [writes.write_samples(con, ["$G"], cycle(i, t), (), t) for i, t in enumerate(times)])
    return len(times)


def test_a_30_day_consumer_view_never_reads_more_than_the_newest_hours_of_raw_samples(tmp_path):
    store = Store(tmp_path / "j.duckdb")
    now = utcnow().replace(microsecond=0)
    _old_raw_samples(store, "LONG", now - dt.timedelta(days=2), hours=2 * 24)  # far more than the limit
    detail = consumer_detail(store, "$G", "LONG", "c", now - dt.timedelta(days=30), now)
    oldest = pd.to_datetime(detail.samples["ts"]).min()
    assert oldest >= pd.Timestamp(now - RAW_RANGE_LIMIT), oldest
    assert len(detail.samples) == RAW_RANGE_LIMIT // dt.timedelta(minutes=10)
    assert detail.source == "raw samples of the last 6 h only: the pipeline has not rolled up this range yet"


# -- Retention: in the collector, on a schedule, never past what rollups cover --------------------

SAMPLES_PER_HOUR = 6  # _old_raw_samples writes one every 10 minutes


def _hourly_rollups(store: Store, stream: str, hours: dict[dt.datetime, int]) -> None:
    """Hourly rollup rows as the pipeline's load writes them: bucket -> samples it counted."""
    store.write(lambda con: con.executemany(
        "INSERT INTO rollups (granularity, bucket, account, stream, consumer, samples) VALUES ('1h', ?, '$G', ?, 'c', ?)",
        [[bucket, stream, n] for bucket, n in hours.items()]))


def _per_hour(store: Store, stream: str) -> dict[dt.datetime, int]:
    found = rows(store, "SELECT timezone('UTC', date_trunc('hour', timezone('UTC', ts))), count(*) FROM samples "
                        "WHERE stream = ? GROUP BY ALL", [stream])
    return {hour.replace(tzinfo=dt.UTC): n for hour, n in found}


def _outage_story(store: Store, stream: str) -> tuple[list[dt.datetime], list[dt.datetime]]:
    """Eight hours of raw samples. The pipeline rolled up hours -8 and -7, rolled up hour -6
    before its last samples arrived, was down for 3 hours (-5, -4, -3), then came back with its
    2-hour window (-2, -1). Returns (hours rollups cover, hours they do not)."""
    top = utcnow().replace(minute=0, second=0, microsecond=0)
    hour = [top - dt.timedelta(hours=h) for h in range(9)]  # hour[h] = start of hour -h
    _old_raw_samples(store, stream, hour[8], hours=8)
    _hourly_rollups(store, stream, {hour[8]: SAMPLES_PER_HOUR, hour[7]: SAMPLES_PER_HOUR, hour[6]: 4,
                                    hour[2]: SAMPLES_PER_HOUR, hour[1]: SAMPLES_PER_HOUR})
    return [hour[8], hour[7]], [hour[6], hour[5], hour[4], hour[3]]


def test_the_collector_retains_on_a_schedule_and_a_3_hour_pipeline_outage_loses_no_unrolled_sample(
        nats_server, db_path, uid, run):
    store = Store(db_path, lock_timeout=30)
    stream = f"{uid}_RETAIN"
    covered, uncovered = _outage_story(store, stream)
    settings = collector_settings(nats_server.url, db_path, (f"{uid}_none",), raw_retention=2 * 3600.0,
                                  retention_every=1.0)

    async def main() -> None:
        async with collecting(settings):
            await eventually(lambda: all(_per_hour(store, stream).get(h, 0) == 0 for h in covered), timeout=30,
                             message="the collector's retention deleting the covered hours")

    run(main())
    kept = _per_hour(store, stream)
    assert {h: kept.get(h, 0) for h in uncovered} == {h: SAMPLES_PER_HOUR for h in uncovered}


def test_the_pipelines_load_deletes_raw_samples_only_where_rollups_cover_them(tmp_path):
    store = Store(tmp_path / "j.duckdb")
    covered, uncovered = _outage_story(store, "LOADED")
    now = utcnow()
    empty = tmp_path / "no-output"
    load(store, empty, now - dt.timedelta(hours=1), now,
         {"samples": now - dt.timedelta(hours=2), "events": now - dt.timedelta(days=90)})
    kept = _per_hour(store, "LOADED")
    assert {h: kept.get(h, 0) for h in covered} == {h: 0 for h in covered}
    assert {h: kept.get(h, 0) for h in uncovered} == {h: SAMPLES_PER_HOUR for h in uncovered}


def _old_and_new_everything(store: Store, old: dt.datetime, new: dt.datetime) -> None:
    """A row past event retention and one within it in every table that grows."""
    def tx(con: Any) -> None:
        for ts in (old, new):
            con.execute("INSERT INTO rejects VALUES (?, 'advisory', 's', 'bad', '{}')", [ts])
            con.execute("INSERT INTO advisories (id, ts, received_at, kind, subject, raw) "
                        "VALUES (?, ?, ?, 'pinned', 's', '{}')", [f"adv-{ts}", ts, ts])
            con.execute("INSERT INTO verdict_changes VALUES (?, '$G', 'S', 'c', NULL, 'OK', 'fine')", [ts])
            con.execute("INSERT INTO pipeline_runs (run_id, started_at, finished_at, outcome) VALUES (?, ?, ?, 'ok')",
                        [f"run-{ts}", ts, ts])
            con.execute("INSERT INTO drains (drain_id, started_at, updated_at, actor, stream, consumer, then_action, state) "
                        "VALUES (?, ?, ?, 'ana', 'S', 'c', 'resume', 'done')", [f"drain-{ts}", ts, ts])
        # Two old config changes of one consumer: the latest stays however old, the one before goes.
        for ts in (old - dt.timedelta(days=1), old):
            con.execute("INSERT INTO consumer_configs (ts, account, stream, consumer, config_hash, is_pull, filtered) "
                        "VALUES (?, '$G', 'S', 'c', ?, true, false)", [ts, f"h-{ts}"])
        con.execute("INSERT INTO drains (drain_id, started_at, updated_at, actor, stream, consumer, then_action, state) "
                    "VALUES ('still-draining', ?, ?, 'ana', 'S', 'c', 'resume', 'draining')", [old, old])
        con.execute("INSERT INTO collector_status (collector, started_at, last_cycle_at) VALUES ('gone:1', ?, ?)",
                    [old, old])

    store.write(tx)


def test_collector_retention_covers_everything_that_grows_and_its_own_config_hash_map(
        nats_server, db_path, uid, run):
    store = Store(db_path, lock_timeout=30)
    now = utcnow()
    old, new = now - dt.timedelta(days=2), now - dt.timedelta(minutes=10)
    _old_and_new_everything(store, old, new)
    settings = collector_settings(nats_server.url, db_path, (f"{uid}_none",), event_retention=86400.0,
                                  retention_every=1.0)

    def counts() -> dict[str, int]:
        # Only the rows this test wrote: the shared server's capture stream may carry other tests' junk.
        mine = {"rejects": " WHERE subject = 's'", "advisories": " WHERE subject = 's'"}
        return {t: rows(store, f"SELECT count(*) FROM {t}{mine.get(t, '')}")[0][0] for t in
                ("rejects", "advisories", "verdict_changes", "pipeline_runs", "drains", "consumer_configs")}

    async def main() -> None:
        async with collecting(settings) as collector:
            collector.sampler.known_hashes[("$G", "GONE", "long-deleted")] = "digest"
            await eventually(lambda: counts()["rejects"] == 1, timeout=30, message="a retention pass")
            await eventually(lambda: ("$G", "GONE", "long-deleted") not in collector.sampler.known_hashes,
                             timeout=30, message="the config hash of a consumer no longer sampled forgotten")
            statuses = [r[0] for r in rows(store, "SELECT collector FROM collector_status")]
            assert statuses == [collector.name]

    run(main())
    assert counts() == {"rejects": 1, "advisories": 1, "verdict_changes": 1, "pipeline_runs": 1,
                        "drains": 2, "consumer_configs": 1}
    assert rows(store, "SELECT drain_id FROM drains WHERE state = 'draining'") == [("still-draining",)]
    assert rows(store, "SELECT ts FROM consumer_configs")[0][0] == old


def test_the_pipelines_parquet_archive_keeps_only_raw_retentions_worth_of_hours(tmp_path):
    store = Store(tmp_path / "j.duckdb")
    top = utcnow().replace(minute=0, second=0, microsecond=0)
    _old_raw_samples(store, "ARCH", top - dt.timedelta(hours=30), hours=30)
    archive = tmp_path / "archive"
    assert export(store, archive, tmp_path / "input", top - dt.timedelta(hours=30), top) == 30 * SAMPLES_PER_HOUR
    assert len(list((archive / "samples").glob("date=*/hour=*"))) == 30

    assert prune_archive(archive, top - dt.timedelta(hours=24)) == 6
    left = sorted(pq.read_table(archive / "samples").column("ts").to_pylist())
    assert len(left) == 24 * SAMPLES_PER_HOUR
    assert left[0] == top - dt.timedelta(hours=24)


# -- Last known state ---------------------------------------------------------------------------

def test_a_consumer_keeps_its_last_verdict_when_the_collector_returns_after_its_window_emptied(
        nats_server, db_path, uid, run):
    stream = f"{uid}_LAST"
    store = Store(db_path, lock_timeout=30)
    settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.3, health_window=3.0,
                                  health_min_span=1.0)

    def current() -> tuple[str, str] | None:
        found = rows(store, "SELECT verdict, reason FROM verdicts_current WHERE stream = ?", [stream])
        return found[0] if found else None

    def window_empty() -> bool:
        newest = rows(store, "SELECT max(ts) FROM samples WHERE stream = ?", [stream])[0][0]
        return (utcnow() - newest).total_seconds() > settings.health_window + 0.5

    async def main() -> tuple[str, str] | None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}last.>"])
        await make_consumer(api, stream, "idle")
        await publish(nc, f"{uid}last.x", 3)  # work pending, nobody pulling
        async with collecting(settings):
            await eventually(lambda: (current() or ("",))[0] == "NO_PULLERS", timeout=30, message="NO_PULLERS")
        await eventually(window_empty, timeout=30, interval=0.2, message="the collector away past its window")
        async with collecting(settings):  # returns once its first cycle is judged
            after = current()
        await nc.close()
        return after

    verdict, reason = run(main())
    assert verdict == "NO_PULLERS", reason
    assert reason.startswith("last known, judged ") and "too few fresh samples to judge again" in reason


def test_the_fleet_says_the_collector_stopped_and_that_verdicts_are_last_known(filled_db):
    """The store a real collector filled, read twelve minutes after its last cycle."""
    view = fleet(Store(filled_db))
    last = pd.to_datetime(view.collector["last_cycle_at"]).max().to_pydatetime()
    warning = staleness(view, last + dt.timedelta(minutes=12, seconds=5), stale_after_s=30)
    assert warning is not None and "collector stopped 12 min 5 s ago" in warning
    assert "Every verdict below is the last known one" in warning
    assert not view.consumers.empty and view.consumers["verdict"].notna().all()


def test_after_a_3_hour_outage_the_next_pipeline_run_starts_where_the_last_good_one_ended(tmp_path):
    store = Store(tmp_path / "j.duckdb")
    now = utcnow()
    runs = [("old-ok", now - dt.timedelta(hours=5), "ok"), ("last-ok", now - dt.timedelta(hours=3), "ok"),
            ("failed", now - dt.timedelta(hours=1), "failed")]
    store.write(lambda con: con.executemany(
        "INSERT INTO pipeline_runs (run_id, started_at, finished_at, until_ts, outcome) VALUES (?, ?, ?, ?, ?)",
        [[run_id, until, until, until, outcome] for run_id, until, outcome in runs]))
    assert default_since(store, now, raw_retention_s=7 * 86400) == now - dt.timedelta(hours=3)
    assert default_since(store, now, raw_retention_s=7200) == now - dt.timedelta(hours=2), "never past raw retention"
    fresh = Store(tmp_path / "fresh.duckdb")
    fresh.migrate()
    assert default_since(fresh, now, raw_retention_s=7 * 86400) == now - dt.timedelta(hours=2)


@pytest.fixture
def small_disk(tmp_path):
    """A real 16 MiB tmpfs: the store lives on it, and the test fills it."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"this test needs root to mount a tmpfs (as `make test` runs on CI): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(directory: Path) -> Path:
    filler = directory / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
        except OSError:
            pass
    return filler


def test_a_full_disk_costs_the_collector_no_cycle_and_is_said(nats_server, small_disk, uid, run):
    """The disk under the store fills up: the collector keeps running, says so, keeps its cycles
    in memory, and once space is back every cycle sampled meanwhile is in the store."""
    stream = f"{uid}_FULL"
    db = str(small_disk / "jetwatch.duckdb")

    async def main() -> list[dt.datetime]:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}full.>"])
        await make_consumer(api, stream, "c")
        settings = collector_settings(nats_server.url, db, (stream,), interval=0.3, lock_timeout=2.0)
        stamps: list[dt.datetime] = []
        async with collecting(settings) as collector:
            _note_stamps(collector, stamps)
            filler = _fill(small_disk)
            try:
                def sampling_error() -> str | None:
                    said = collector.last_error[0] if collector.last_error else ""
                    return said if said.startswith("sampling failed") else None

                said = await eventually(sampling_error, timeout=60,
                                        message="the full disk said in the collector's sampling error")
                assert "disk under the store" in said and "is full" in said and "wait in memory" in said
                full_from = len(stamps)
                await eventually(lambda: len(stamps) >= full_from + 3, timeout=60,
                                 message="three cycles sampled while the disk is full")
                assert len(collector.backlog) > 0, "cycles kept in memory while the store cannot take them"
            finally:
                filler.unlink()
            done = collector.cycles
            await eventually(lambda: collector.cycles >= done + 2 and len(collector.backlog) == 0, timeout=60,
                             message="the kept cycles written once space is back")
        await nc.close()
        return stamps

    stamps = run(main())
    stored = {r[0] for r in rows(Store(db), "SELECT DISTINCT ts FROM samples WHERE stream = ?", [stream])}
    missing = [t for t in stamps if t not in stored]
    assert missing == [], f"{len(missing)} of {len(stamps)} cycles never reached the store"


def test_advisories_that_arrive_while_the_disk_is_full_are_all_stored_once_with_no_gap(small_disk, tmp_path, run):
    """NAKs stream in while the disk under the store is full: the collector cannot store them, so it
    acknowledges none, and the durable hands out the newer ones before it redelivers those. Once
    space is back every advisory is stored once, and none is booked lost (two gap rows claimed 72
    dropped before, for advisories the capture stream still held)."""
    from jetwatch.core.embedded_server import NatsServer

    server = NatsServer(store_dir=tmp_path / "js").start()
    db = str(small_disk / "jetwatch.duckdb")
    store, total = Store(db, lock_timeout=30), 200

    async def main() -> None:
        nc = await nats.connect(server.url)
        subject = "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.S.w"

        async def nak(i: int) -> None:
            await nc.publish(subject, json.dumps({
                "type": "io.nats.jetstream.advisory.v1.nak", "id": f"full-{i}", "timestamp": rfc3339(utcnow()),
                "account": "$G", "stream": "S", "consumer": "w", "stream_seq": i + 1, "consumer_seq": i + 1,
                "deliveries": 2}).encode())

        async with collecting(collector_settings(server.url, db, ("S",), interval=0.3, lock_timeout=2.0)) as collector:
            for i in range(total // 4):
                await nak(i)
            await eventually(lambda: rows(store, "SELECT count(*) FROM advisories")[0][0] == total // 4,
                             timeout=60, message="the first advisories stored")
            filler = _fill(small_disk)
            try:
                for i in range(total // 4, total):
                    await nak(i)
                    await asyncio.sleep(0.02)
                await eventually(lambda: collector.last_error and "is full" in collector.last_error[0], timeout=60,
                                 message="the full disk said")
            finally:
                filler.unlink()
            await eventually(lambda: rows(store, "SELECT count(*) FROM advisories")[0][0] >= total, timeout=90,
                             message="every advisory stored once space is back")
        await nc.close()

    try:
        run(main())
    finally:
        server.stop()
    assert rows(store, "SELECT count(*), count(DISTINCT id) FROM advisories") == [(total, total)]
    assert rows(store, "SELECT from_seq, to_seq, reason FROM capture_gaps") == []


def _collector_process(server_url: str, db_path: str, stream: str, stderr: int) -> subprocess.Popen[str]:
    """`jetwatch collect` as its own process, a cycle every 0.2 s, sampling one stream."""
    return subprocess.Popen(
        [sys.executable, "-m", "jetwatch.cli", "collect", "--server", server_url, "--db", db_path,
         "--interval", "0.2s", "--include-streams", stream],
        env=clean_env(), stdout=subprocess.DEVNULL, stderr=stderr, text=True)


def test_a_collector_killed_mid_write_loses_nothing_it_committed_and_the_store_opens(nats_server, db_path, uid, run):
    """SIGKILL, three times, while the collector writes every 0.2 s: each time the store opens
    (DuckDB replays its write-ahead log), holds at least every sample seen committed before the
    kill, and the next collector carries on in the same file."""
    stream = f"{uid}_KILL"
    run(one_consumer_stream(nats_server.url, stream, f"{uid}kill.>"))
    store = Store(db_path, lock_timeout=30)
    committed = 0
    for _ in range(3):
        proc = _collector_process(nats_server.url, db_path, stream, stderr=subprocess.DEVNULL)
        try:
            seen = committed
            wait_until(lambda: store.exists() and _samples(store, stream) >= seen + 5, timeout=60,
                       message="five more cycles committed")
            committed = _samples(store, stream)
        finally:
            proc.kill()
            proc.wait(10)
        after = _samples(store, stream)
        assert after >= committed, f"{committed - after} committed samples lost to SIGKILL"
        committed = after
    assert rows(store, "SELECT count(*) FROM samples WHERE stream = ? AND num_pending IS NULL", [stream]) == [(0,)]


def test_a_collector_whose_store_a_newer_release_upgraded_stops_and_says_to_restart(nats_server, db_path, uid, run):
    """Its cycles could never be written again: it used to keep them in memory, promise they would
    be, and sample on with two errors a cycle and a status row frozen in the store."""
    stream = f"{uid}_NEWER"
    run(one_consumer_stream(nats_server.url, stream, f"{uid}newer.>"))
    store = Store(db_path, lock_timeout=30)
    proc = _collector_process(nats_server.url, db_path, stream, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: store.exists() and _samples(store, stream) >= 2, timeout=60, message="two cycles stored")

        def upgrade(con: duckdb.DuckDBPyConnection) -> None:  # what a newer release's migration leaves
            con.execute("INSERT INTO schema_version VALUES (?, now())", [sql.schema_version() + 1])

        store.write(upgrade)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 1
    assert "by a newer jetwatch while this one" in err and "Restart this process with the newer release" in err
    assert "written with the next cycle" not in err
    assert err.count("by a newer jetwatch") <= 4, err


def _samples(store: Store, stream: str) -> int:
    return rows(store, "SELECT count(*) FROM samples WHERE stream = ?", [stream])[0][0]


def test_a_fault_in_judging_costs_that_cycle_its_verdicts_never_its_samples(nats_server, db_path, uid, run,
                                                                            monkeypatch):
    """Verdicts are judged in the cycle's own write transaction: when judging itself fails (here
    the rules raise, cycle after cycle), each cycle's samples are still committed while it lasts,
    the error is said, and once mended the cycles judge again from a state that holds exactly what
    the store holds (no sample twice, none missing)."""
    from jetwatch.collectors import runner

    stream = f"{uid}_JUDGED"
    real, failures, mended = runner.judge, [], []
    stamps: list[dt.datetime] = []

    def failing(*args: Any, **kwargs: Any) -> Any:
        if not mended:
            failures.append(len(stamps))  # the stamps sampled so far, this cycle's included
            raise RuntimeError("the rules broke")
        return real(*args, **kwargs)

    async def main() -> tuple[list[dt.datetime], list[int], dt.datetime]:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}judged.>"])
        await make_consumer(api, stream, "c")
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.3)
        async with collecting(settings) as collector:
            _note_stamps(collector, stamps)
            monkeypatch.setattr(runner, "judge", failing)
            await eventually(lambda: collector.last_error and "the rules broke" in collector.last_error[0],
                             timeout=30, message="the judging fault said")
            await eventually(lambda: len(failures) >= 3, timeout=30, message="three cycles that could not be judged")
            failed_by = failures[1]  # the second failed cycle's samples: committed before the third began
            stored = {r[0] for r in rows(Store(db_path), "SELECT DISTINCT ts FROM samples WHERE stream = ?", [stream])}
            assert [t for t in stamps[:failed_by] if t not in stored] == [], "stored while judging fails"
            mended.append(True)
            done = collector.cycles
            await eventually(lambda: collector.cycles >= done + 2, timeout=30, message="two cycles judged after it")
        await nc.close()
        # Stopped: the samples of the consumer in the collector's memory, against the store's.
        since = collector.judged.at - dt.timedelta(seconds=3600)
        kept = collector.window.window.features(since)
        return stamps[:failed_by], kept.loc[kept["stream"] == stream, "samples"].tolist(), since

    unjudged, in_memory, since = run(main())
    store = Store(db_path)
    stored = {r[0] for r in rows(store, "SELECT DISTINCT ts FROM samples WHERE stream = ?", [stream])}
    assert [t for t in unjudged if t not in stored] == [], "the cycles whose judging failed kept their samples"
    assert in_memory == [r[0] for r in rows(store, "SELECT count(*) FROM samples WHERE stream = ? AND ts >= ?",
                                            [stream, since])]
    assert rows(store, "SELECT verdict FROM verdicts_current WHERE stream = ?", [stream]) != []


def test_a_write_reported_failed_on_a_full_disk_left_none_of_its_rows_and_every_write_reported_kept_is_there(small_disk):
    """Filling the disk write by write: a write the store reports as failed (which the collector
    then writes again with its next cycle) must have left nothing, and one it reports kept must be
    whole, whatever the checkpoint after the COMMIT could or could not do."""
    store = Store(small_disk / "jetwatch.duckdb", lock_timeout=2)
    store.write(lambda con: con.execute("CREATE TABLE t (k BIGINT, i BIGINT, s VARCHAR)"))
    filler = small_disk / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, shutil.disk_usage(small_disk).free - 700_000))
    reported: dict[int, bool] = {}
    for k in range(40):
        def insert(con: duckdb.DuckDBPyConnection, k: int = k) -> None:
            con.execute("INSERT INTO t SELECT $k, i, 'v' || i || 'xxxxxxxx' || $k FROM range(20000) r(i)", {"k": k})
        try:
            store.write(insert)
            reported[k] = True
        except StoreFull:
            reported[k] = False
    filler.unlink()
    free = subprocess.run([sys.executable, "-c", "import duckdb, sys; duckdb.connect(sys.argv[1]).close()",
                           str(store.path)], capture_output=True, text=True, timeout=60)
    assert free.returncode == 0, f"a failed write left the file open in this process: {free.stderr}"
    stored = dict(rows(store, "SELECT k, count(*) FROM t GROUP BY k"))
    assert not all(reported.values()), "the disk never filled: the test proves nothing"
    assert [k for k, kept in reported.items() if not kept and k in stored] == [], "reported lost, yet stored"
    assert [k for k, kept in reported.items() if kept and stored.get(k) != 20000] == [], "reported kept, yet not whole"


_PROBE = """
import sys, time, duckdb
deadline = time.monotonic() + float(sys.argv[2])
tries = 0
while time.monotonic() < deadline:
    tries += 1
    try:
        duckdb.connect(sys.argv[1]).close()
    except duckdb.Error:
        time.sleep(0.02)
        continue
    print("got in after", tries, "tries"); sys.exit(1)
print("refused", tries, "times")
"""


def test_a_read_in_the_same_process_during_a_write_never_lets_another_process_into_the_file(db_path):
    """A page's read in the process that is writing (`jetwatch up`, the dashboard's own writes)
    waits for the write instead of opening the file out of turn: a refused open there would close
    a descriptor of the file, which drops the writer's lock and lets another process in mid-write."""
    Store(db_path).migrate()
    inside, release = threading.Event(), threading.Event()

    def slow_write(con: duckdb.DuckDBPyConnection) -> None:
        con.execute("CREATE TABLE marker AS SELECT 1 AS written")
        inside.set()
        assert release.wait(60), "the test never let the write finish"

    writer = threading.Thread(target=Store(db_path).write, args=(slow_write,))
    writer.start()
    assert inside.wait(30), "the write never began"
    read: list[Any] = []
    reader = threading.Thread(target=lambda: read.append(
        Store(db_path, lock_timeout=30).read(lambda con: con.execute("SELECT * FROM marker").fetchall())))
    reader.start()
    try:
        probe = subprocess.run([sys.executable, "-c", _PROBE, str(db_path), "2"], capture_output=True, text=True,
                               timeout=60)
    finally:
        release.set()
        writer.join(60)
        reader.join(60)
    assert probe.returncode == 0, f"another process opened the file during the write: {probe.stdout}{probe.stderr}"
    assert read == [[(1,)]], "the read waited for the write and saw it"


def test_reads_at_once_in_one_process_hold_the_file_until_the_last_one_ends(db_path):
    """Two reads in one process at once (two browser tabs on one dashboard): the one that ends
    first must not let another process's writer in while the other still reads (closing a second
    descriptor of the file would drop this process's lock on it), and once the last read ends
    the file is free for a writer at once."""
    Store(db_path).migrate()
    inside, release = threading.Event(), threading.Event()

    def slow_read(con: duckdb.DuckDBPyConnection) -> list[Any]:
        inside.set()
        assert release.wait(60), "the test never let the read finish"
        return con.execute("SELECT count(*) FROM verdicts_current").fetchall()

    read: list[Any] = []
    reader = threading.Thread(target=lambda: read.append(Store(db_path, lock_timeout=30).read(slow_read)))
    reader.start()
    try:
        assert inside.wait(30), "the first read never began"
        quick = Store(db_path).read(lambda con: con.execute("SELECT count(*) FROM verdicts_current").fetchall())
        probe = subprocess.run([sys.executable, "-c", _PROBE, str(db_path), "2"], capture_output=True, text=True,
                               timeout=60)
    finally:
        release.set()
        reader.join(60)
    assert quick == [(0,)] and read == [[(0,)]]
    assert probe.returncode == 0, f"another process opened the file while a read went on: {probe.stdout}{probe.stderr}"
    free = subprocess.run([sys.executable, "-c", "import duckdb, sys; duckdb.connect(sys.argv[1]).close()",
                           str(db_path)], capture_output=True, text=True, timeout=60)
    assert free.returncode == 0, f"the file stayed held after the last read: {free.stderr}"


def test_a_checkpoint_on_a_full_disk_says_the_disk_is_full(small_disk):
    """Retention's checkpoint (the collector catches StoreError there, logs it and tries later) on a
    disk that filled up: the error is the store's own, in words, not DuckDB's raw one."""
    store = Store(small_disk / "jetwatch.duckdb", lock_timeout=2)
    store.write(lambda con: con.execute("CREATE TABLE t (k BIGINT, i BIGINT, s VARCHAR)"))
    with open(small_disk / "filler", "wb") as f:
        f.write(b"\0" * max(0, shutil.disk_usage(small_disk).free - 3_000_000))
    for k in range(40):
        try:
            store.write(lambda con, k=k: con.execute(
                "INSERT INTO t SELECT $k, i, 'v' || i || 'xxxxxxxxxxxx' FROM range(20000) r(i)", {"k": k}))
        except StoreFull:
            break
    else:
        pytest.fail("the disk never filled: the test proves nothing")
    with pytest.raises(StoreFull, match="is full"):
        store.checkpoint()


def test_sampling_goes_on_at_its_interval_while_another_process_holds_the_file(nats_server, db_path, uid, run):
    """A process holds the file read-only for 12 s, longer than the collector's lock timeout: the
    cycles go on at their interval all the while (they wait in memory), so the samples stored
    afterwards have no gap longer than about two intervals: no gap in the charts."""
    stream = f"{uid}_STEADY"
    interval, hold_s = 1.0, 12.0

    async def main() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}steady.>"])
        await make_consumer(api, stream, "c")
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=interval, lock_timeout=4.0)
        async with collecting(settings) as collector:
            holder = subprocess.Popen([sys.executable, "-c", HOLD, db_path], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE)
            try:
                assert holder.stdout.readline() == b"held\n"
                await asyncio.sleep(hold_s)  # the hold itself is what is tested: it lasts this long
            finally:
                holder.stdin.close()
                holder.wait(10)
            done = collector.cycles
            await eventually(lambda: collector.cycles >= done + 2 and len(collector.backlog) == 0, timeout=60,
                             message="the cycles kept in memory written after the release")
        await nc.close()

    run(main())
    stamps = sorted(r[0] for r in rows(Store(db_path), "SELECT DISTINCT ts FROM samples WHERE stream = ? ORDER BY ts",
                                       [stream]))
    gaps = [(b - a).total_seconds() for a, b in zip(stamps, stamps[1:])]
    assert len(stamps) >= hold_s / interval, f"only {len(stamps)} cycles stored: {gaps}"
    assert max(gaps) <= 2.5 * interval, f"a gap of {max(gaps):.1f}s in the samples (interval {interval}s): {gaps}"


@pytest.mark.parametrize("command,status,said", [
    (["status"], 1, "jetwatch: The store"),
    (["check"], 3, "JETWATCH UNKNOWN - The store"),
    (["collect", "--server", "nats://127.0.0.1:1"], 1, "jetwatch: The store"),
], ids=["status", "check", "collect"])
def test_a_store_cut_short_past_its_header_is_said_in_one_line_never_a_traceback(command, status, said, filled_db,
                                                                                  tmp_path):
    """A real store cut short after its first block: where its header points at a block past the
    cut (as a store checkpointed late in its life does) it does not open; else it opens and the
    first read of any table's rows reaches a missing block, `collect`'s included, before it waits
    for a server. Either way it is said. (A cut further on may leave every block a command reads at
    startup: then the first read that reaches the hole says it.) `check` says UNKNOWN (exit 3), as the
    monitoring-plugin convention wants for a check that cannot tell; the others say it in one line
    and exit 1."""
    data = Path(filled_db).read_bytes()
    cut = tmp_path / "cut.duckdb"
    cut.write_bytes(data[:FIRST_BLOCK_END])
    done = _jetwatch([*command, "--db", str(cut)])
    out = (done.stdout + done.stderr).strip()
    assert done.returncode == status, done
    assert "Traceback" not in out, out
    # Said at open (where the header points past the cut) or at the first read of a missing block:
    # either way, what it is and what to do.
    assert said in out and "is not a readable DuckDB database" in out and "truncated or damaged" in out, out
    assert "Move it aside" in out, out
    assert len(done.stderr.strip().splitlines()) <= 1, done.stderr


# DuckDB's three 4 KiB headers and its first block of 256 KiB: the catalog, without a table's rows.
FIRST_BLOCK_END = 3 * 4096 + 256 * 1024


@pytest.mark.parametrize("error, conflict, said", [
    (duckdb.IOException('IO Error: Could not set lock on file "s.duckdb": Conflicting lock is held in pid 7'), True, None),
    (duckdb.ResourceInUseException('Unique file handle conflict: Cannot attach "s" - already attached'), True, None),
    (duckdb.ConnectionException("Can't open a connection to same database file with a different configuration than existing connections"),
     True, None),
    (duckdb.IOException('IO Error: Cannot open file "s.duckdb": Permission denied'), False, StoreUnwritable),
    (PermissionError(errno.EACCES, "Permission denied"), False, StoreUnwritable),
    # A query's own error that quotes a name or a value is not a file problem, whatever the text says.
    (duckdb.CatalogException("Table with name Could not set lock does not exist!"), False, None),
    (duckdb.CatalogException("Table with name Permission denied does not exist!"), False, None),
    (duckdb.ConversionException("Could not convert string 'not a valid DuckDB database file' to INT32"), False, None),
    # A damaged block: DuckDB's base Error as such, at open or at the block's first read.
    (duckdb.Error("Corrupt database file: computed checksum 5381 does not match stored checksum 0 in block at "
                  "location 8192"), False, StoreCorrupt),
    (duckdb.ConversionException("Could not convert string 'Corrupt database file' to INT32"), False, None),
    # Each lock conflict's text counts only in the type it comes as: a closed connection is no conflict.
    (duckdb.ConnectionException("Connection Error: Connection already closed!"), False, None),
    (duckdb.ConnectionException('Could not set lock on file "s.duckdb": Conflicting lock is held'), False, None),
])
def test_store_errors_are_told_apart_by_duckdbs_type_first_and_its_text_only_within_it(error, conflict, said, tmp_path):
    path = tmp_path / "s.duckdb"
    assert database._is_lock_conflict(error) is conflict
    found = database.unusable(path, error)
    assert (type(found) if found is not None else None) is said, found
    if said is None or said is StoreCorrupt:  # the same for a read that reaches a damaged block
        found = database.corrupt(path, error)
        assert (type(found) if found is not None else None) is said, found


@pytest.mark.parametrize("error, full", [
    (OSError(errno.ENOSPC, "No space left on device"), True),
    (duckdb.IOException('IO Error: Could not write file "s.duckdb": No space left on device'), True),
    (duckdb.TransactionException('TransactionContext Error: Failed to commit: Could not write file "s.duckdb.wal": '
                                 "No space left on device"), True),
    # A query's own error quoting a value is no full disk, whatever the value says.
    (duckdb.ConversionException("Could not convert string 'No space left on device' to INT32"), False),
    (duckdb.ConstraintException('Duplicate key "k: No space left on device" violates primary key constraint'), False),
    (duckdb.IOException('IO Error: Cannot open file "s.duckdb": Permission denied'), False),
])
def test_a_full_disk_is_told_by_the_types_a_write_error_comes_as_and_its_text_only_within_them(error, full, tmp_path):
    found = database._disk_full(tmp_path / "s.duckdb", error)
    assert isinstance(found, StoreFull) if full else found is None, found


def _cut_short(data: bytes) -> bytes:
    return data[:len(data) // 5 // 4096 * 4096]


def _damaged_block(data: bytes) -> bytes:
    """One 4 KiB block past the header zeroed, as a bad sector or a torn copy leaves it: DuckDB
    finds the checksum wrong (and raises its plain Error, not an IOException)."""
    return data[:8192] + bytes(4096) + data[12288:]


@pytest.mark.parametrize("damage", [_cut_short, _damaged_block], ids=["cut-short", "damaged-block"])
def test_a_truncated_or_damaged_store_is_said_in_words_on_every_page_never_a_traceback(damage, filled_db, tmp_path,
                                                                                      app_env):
    """A real store, cut short or with a damaged block: every page says what happened and what to
    do in one error, and shows no exception (no traceback, no source file paths)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from tests.test_dashboard import APP

    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(damage(Path(filled_db).read_bytes()))
    app_env(str(bad))
    for page in ("views/fleet.py", "views/consumer.py", "views/pins.py", "views/audit.py"):
        st.cache_data.clear()
        at = AppTest.from_file(APP, default_timeout=60)
        at.run()
        at.switch_page(page).run()
        assert not at.exception, (page, [e.message for e in at.exception])
        said = [e.value.replace("\\", "") for e in at.error]
        assert said, f"{page} said nothing of the damaged store"
        assert all(f"The store {bad} is not a readable DuckDB database" in e and "Move it aside" in e
                   and "restore it from a backup" in e for e in said), (page, said)
    # The command line, too: `check` says UNKNOWN; a store whose first blocks are damaged keeps the
    # dashboard from starting (one cut short past them opens, and its pages say it, as above).
    commands = [(["status"], 1), (["check"], 3)] + ([(["dashboard"], 1)] if damage is _damaged_block else [])
    for command, status in commands:
        done = _jetwatch([*command, "--db", str(bad)])
        out = done.stdout + done.stderr
        assert done.returncode == status and "Traceback" not in out, (command, out)
        assert "is not a readable DuckDB database" in out, (command, out)


def test_a_read_that_finds_the_file_damaged_reads_it_once_more_before_saying_so(tmp_path):
    """A reader in another process can catch the file while a writer extends it: DuckDB then says
    "Could not read enough bytes", the words of a truncated file. Read once more, on a fresh
    connection: what reads the second time is no damaged store; what fails twice is said to be."""
    store = Store(str(tmp_path / "jetwatch.duckdb"))
    store.migrate()
    calls = []

    def busy_once(con):
        calls.append(con)
        if len(calls) == 1:
            raise duckdb.IOException("IO Error: Could not read enough bytes from file: attempted to read 262144 bytes")
        return con.execute("SELECT 42").fetchone()[0]

    assert store.read(busy_once) == 42 and len(calls) == 2 and calls[0] is not calls[1]

    def always(con):
        raise duckdb.IOException("IO Error: Could not read enough bytes from file")

    with pytest.raises(StoreCorrupt, match="is not a readable DuckDB database"):
        store.read(always)


@st.composite
def _damage(draw: Any) -> Callable[[bytes], bytes]:
    """A store file cut short anywhere, or a stretch of it overwritten with zeros or any bytes,
    as a full disk, a torn copy or a hand edit leaves it."""
    kind = draw(st.sampled_from(["cut", "zeros", "bytes"]))
    at = draw(st.floats(0.0, 1.0))
    length = draw(st.sampled_from([1, 64, 4096, 40960]))
    noise = draw(st.binary(min_size=1, max_size=64))

    def damage(data: bytes) -> bytes:
        start = int(at * (len(data) - 1))
        if kind == "cut":
            return data[:start]
        stretch = bytes(length) if kind == "zeros" else (noise * (length // len(noise) + 1))[:length]
        return data[:start] + stretch + data[start + length:]
    return damage


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage=_damage())
def test_a_store_damaged_anywhere_is_read_or_refused_in_words_never_a_traceback(damage, filled_db, tmp_path_factory):
    """Whatever happened to the file, `status` and `check` answer: with what they read, or with
    the store's error in words (what happened and what to do), never a traceback or a hang."""
    bad = tmp_path_factory.mktemp("damaged") / "jetwatch.duckdb"
    bad.write_bytes(damage(Path(filled_db).read_bytes()))
    status = _jetwatch(["status", "--db", str(bad)])
    out = status.stdout + status.stderr
    assert "Traceback" not in out and status.returncode in (0, 1), (status.returncode, out[-2000:])
    assert status.returncode == 0 or f"store {bad}" in out, out[-2000:]
    # `check` answers as a monitoring check does, in one line: OK, WARNING, CRITICAL, or UNKNOWN
    # with its reason (a store it cannot read, or verdicts too old to trust).
    check = _jetwatch(["check", "--db", str(bad)])
    out = check.stdout + check.stderr
    assert "Traceback" not in out and check.returncode in (0, 1, 2, 3) and out.startswith("JETWATCH "), \
        (check.returncode, out[-2000:])
