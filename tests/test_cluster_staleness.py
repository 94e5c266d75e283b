"""Staleness is judged per cluster: a fleet of two stores (clusters eu and us), each written as its
collector writes it (samples judged by the collector's judging, its status row), where us's
collector stopped 6 minutes ago and eu's is running. Every page, `jetwatch status` and `jetwatch
check` name us; none may call the fleet fresh because eu is. And the sidebar's collector of a store
whose collector restarted on a host 5 minutes behind is the new one, by the server's clock."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import streamlit as st

from jetwatch.store import clusters, writes
from jetwatch.store.database import Store
from tests.helpers import clean_env
from tests.test_dashboard import run_app
from tests.test_live_verdicts import _two_consumers

STOPPED = dt.timedelta(minutes=6)  # how long ago us's collector stopped
STALE_AFTER = "2m"  # longer than a page takes to run; shorter than STOPPED
PAGES = ("views/fleet.py", "views/consumer.py", "views/pins.py", "views/audit.py")


def _status(store: Store, name: str, local_cycle: dt.datetime, offset_s: float = 0.0, mode: str = "jsz") -> None:
    """The collector's status row as it writes it: its own times on its host's clock, with the
    offset it measured (the server's clock minus its host's)."""
    store.write(lambda con: writes.write_status(con, {
        "collector": name, "started_at": local_cycle - dt.timedelta(minutes=1), "last_cycle_at": local_cycle,
        "cycle_seconds": 0.1, "streams": 1, "consumers": 2, "sample_mode": mode, "capture_mode": "stream",
        "capture_pending": 0, "capture_caught_up": True, "last_event_at": None, "last_error": None,
        "last_error_at": None, "server_url": None, "clock_offset_seconds": offset_s, "capture_warning": None}))


def _cluster_store(path: Path, cluster: str, last: dt.datetime) -> Store:
    """A store claimed by `cluster` whose collector's last cycle (and verdicts) were at `last`."""
    store = Store(path)
    store.write(lambda con: clusters.claim(con, cluster, path))  # as the collector's first write does
    _two_consumers(store, last, idle_pending=0)  # both consumers OK
    _status(store, f"{cluster}-host:1", last)
    return store


@pytest.fixture
def fleet(tmp_path):
    now = dt.datetime.now(dt.UTC)
    base = tmp_path / "stores"
    dbs = {"eu": base / "eu.duckdb", "us": base / "us.duckdb"}
    _cluster_store(dbs["eu"], "eu", now)
    _cluster_store(dbs["us"], "us", now - STOPPED)
    return {"dir": base, "dbs": dbs}


@pytest.fixture
def dash(monkeypatch):
    for k in list(os.environ):
        if k.startswith("JETWATCH_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("JETWATCH_STALE_AFTER", STALE_AFTER)
    st.cache_data.clear()
    yield monkeypatch
    st.cache_data.clear()


def _stale_warnings(at) -> list[str]:
    return [w.value for w in at.warning if "stale" in w.value]


def test_every_page_names_the_cluster_whose_collector_stopped(fleet, dash):
    dash.setenv("JETWATCH_DBS", str(fleet["dir"]))
    for page in PAGES:
        at = run_app(page)
        said = _stale_warnings(at)
        assert len(said) == 1, (page, said)
        assert said[0].startswith("Data is stale for cluster us: cluster us's collector stopped 6 min"), (page, said)
        assert "eu" not in said[0], (page, said)
        assert "`jetwatch collect --cluster us`" in said[0] and " UTC)" in said[0], (page, said)


def test_no_page_says_stale_while_every_clusters_collector_runs(tmp_path, dash):
    """The look-alike: two clusters, both fresh."""
    now = dt.datetime.now(dt.UTC)
    for c in ("eu", "us"):
        _cluster_store(tmp_path / f"{c}.duckdb", c, now)
    dash.setenv("JETWATCH_DBS", str(tmp_path))
    for page in PAGES:
        assert _stale_warnings(run_app(page)) == [], page


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jetwatch.cli", *args], capture_output=True, text=True,
                          env=clean_env(JETWATCH_STALE_AFTER=STALE_AFTER), timeout=120)


def test_status_and_check_name_the_stale_cluster(fleet):
    dbs = str(fleet["dir"])
    done = _cli("status", "--dbs", dbs)
    assert done.returncode == 0, done.stderr
    assert {line.split()[2] for line in done.stdout.splitlines()[1:]} == {"eu", "us"}  # every verdict, as judged
    stale = [line for line in done.stderr.splitlines() if "stale" in line]
    assert len(stale) == 1 and stale[0].startswith("jetwatch: cluster us: the newest verdict is 6 min"), done.stderr
    assert "`jetwatch collect --cluster us`" in stale[0]

    done = _cli("status", "--dbs", dbs, "--json")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert {(r["cluster"], r["stale"]) for r in got} == {("eu", False), ("us", True)}

    done = _cli("check", "--dbs", dbs)
    assert done.returncode == 3, done.stdout  # UNKNOWN, never OK, though every verdict read is OK
    line = done.stdout.strip()
    assert line.startswith("JETWATCH UNKNOWN - 2 consumers: 2 OK | UNKNOWN: cluster us: the newest verdict is 6 min"), line
    assert "eu:" not in line and "\n" not in line
    assert " UTC), stale: is `jetwatch collect --cluster us` running" in line  # since when, and what to do

    fresh = _cli("check", "--dbs", dbs, "--cluster", "eu")
    assert fresh.returncode == 0 and fresh.stdout.startswith("JETWATCH OK"), fresh.stdout


def test_the_sidebar_shows_the_collector_restarted_on_a_host_behind_not_the_dead_one(tmp_path, dash):
    """The collector of one store died 2 minutes ago on a host with a right clock; it was restarted
    on a host 5 minutes behind the server, and has just completed a cycle. By its host's clock that
    cycle is older than the dead one's last; by the server's it is the newest."""
    now = dt.datetime.now(dt.UTC)
    db = tmp_path / "j.duckdb"
    store = Store(db)
    _two_consumers(store, now, idle_pending=0)
    _status(store, "old-host:1", now - dt.timedelta(minutes=2), mode="consumer_list")
    _status(store, "new-host:2", now - dt.timedelta(minutes=5), offset_s=300.0, mode="jsz")
    dash.setenv("JETWATCH_DB", str(db))
    at = run_app()
    said = [c.value for c in at.sidebar.caption if c.value.startswith("last cycle ")]
    assert len(said) == 1 and " via jsz" in said[0], said
    assert said[0].startswith("last cycle ") and " s ago" in said[0] and "min" not in said[0], said
    assert _stale_warnings(at) == []
