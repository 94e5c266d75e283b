"""`jetwatch status`, `check` and `audit verify` over a fleet: every store of --dbs (or of a
directory), each its own cluster, read as the dashboard reads them. Two real stores written by the
real write path (samples, then the collector's judging), each claimed by its cluster."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from jetwatch.cli import main
from jetwatch.store import clusters
from jetwatch.store.database import Store
from tests.helpers import rows
from tests.test_live_verdicts import _two_consumers
from tests.test_security_actions import _audited_actions


@pytest.fixture(autouse=True)
def no_settings_from_env(monkeypatch):
    for k in list(os.environ):
        if k.startswith("JETWATCH_"):
            monkeypatch.delenv(k)


def _claimed(path: Path, cluster: str) -> Store:
    store = Store(path)
    store.write(lambda con: clusters.claim(con, cluster, path))  # as the collector's first write does
    return store


@pytest.fixture
def fleet(tmp_path):
    """Cluster a: consumer C with work and nobody pulling (NO_PULLERS), D healthy; cluster b: both
    healthy. The same names in both clusters."""
    base = tmp_path / "stores"
    now = dt.datetime.now(dt.UTC)
    dbs = {c: base / f"{c}.duckdb" for c in "ab"}
    _two_consumers(_claimed(dbs["a"], "a"), now, idle_pending=5)
    _two_consumers(_claimed(dbs["b"], "b"), now, idle_pending=0)
    return {"dir": base, "dbs": dbs}


def _direct(dbs: dict[str, Path]) -> set[tuple[str, str, str, str]]:
    """(cluster, stream, consumer, verdict) straight from each file, its cluster from the file."""
    out = set()
    for db in dbs.values():
        store = Store(db)
        [(cluster,)] = rows(store, "SELECT value FROM store_meta WHERE key = 'cluster'")
        out |= {(cluster, *r) for r in rows(store, "SELECT stream, consumer, verdict FROM verdicts_current")}
    return out


def test_status_lists_every_stores_verdicts_with_its_cluster(fleet, capsys):
    direct = _direct(fleet["dbs"])
    assert {v for *_, v in direct} >= {"NO_PULLERS", "OK"} and len(direct) == 4
    assert main(["status", "--dbs", str(fleet["dir"])]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:6] == ["VERDICT", "SINCE", "CLUSTER", "ACCOUNT", "STREAM", "CONSUMER"]
    shown = [line.split() for line in lines[1:]]
    assert {(r[2], r[4], r[5], r[0]) for r in shown} == direct
    assert shown[0][0] == "NO_PULLERS" and shown[0][2] == "a"  # worst first over both clusters

    files = ",".join(str(p) for p in fleet["dbs"].values())
    assert main(["status", "--dbs", files, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert {(r["cluster"], r["stream"], r["consumer"], r["verdict"]) for r in got} == direct

    assert main(["status", "--dbs", files, "--json", "--cluster", "b", "--consumer", "C"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [(r["cluster"], r["consumer"]) for r in got] == [("b", "C")]


def test_status_says_which_store_it_could_not_read_beside_the_others(fleet, tmp_path, capsys):
    missing = tmp_path / "c.duckdb"
    assert main(["status", "--dbs", f"{fleet['dbs']['a']},{missing}", "--json"]) == 1
    out = capsys.readouterr()
    assert {r["cluster"] for r in json.loads(out.out)} == {"a"}
    assert str(missing) in out.err and "No store" in out.err


def test_check_takes_the_worst_state_over_every_store(fleet, capsys):
    d = str(fleet["dir"])
    assert main(["check", "--dbs", d, "--stale-after", "1h"]) == 2
    out = capsys.readouterr().out.strip()
    assert out.startswith("JETWATCH CRITICAL - 4 consumers:") and "a: S/C NO_PULLERS" in out and "\n" not in out
    assert main(["check", "--dbs", d, "--stale-after", "1h", "--cluster", "b"]) == 0
    assert capsys.readouterr().out.startswith("JETWATCH OK - 2 consumers: 2 OK")
    assert main(["check", "--dbs", d, "--stale-after", "1h", "--cluster", "nowhere"]) == 3
    assert "UNKNOWN" in capsys.readouterr().out


def test_check_is_never_ok_while_one_clusters_store_is_missing_or_stale(fleet, tmp_path, capsys):
    healthy = ["--consumer", "D", "--stale-after", "1h"]  # OK in both clusters
    missing = tmp_path / "c.duckdb"
    assert main(["check", "--dbs", f"{fleet['dbs']['a']},{missing}", *healthy]) == 3
    out = capsys.readouterr().out
    assert out.startswith("JETWATCH UNKNOWN - 1 consumers: 1 OK | UNKNOWN: the store")
    assert str(missing) in out and "No store" in out

    # cluster b's collector stopped two hours ago: its verdicts are stale, a's fresh and OK
    old = tmp_path / "old"
    _two_consumers(_claimed(old / "b.duckdb", "b"), dt.datetime.now(dt.UTC) - dt.timedelta(hours=2), 0)
    assert main(["check", "--dbs", f"{fleet['dbs']['a']},{old / 'b.duckdb'}", *healthy]) == 3
    out = capsys.readouterr().out
    assert out.startswith("JETWATCH UNKNOWN") and "cluster b: the newest verdict is" in out
    # the worst still wins: a's CRITICAL is not hidden behind b's UNKNOWN
    assert main(["check", "--dbs", f"{fleet['dbs']['a']},{old / 'b.duckdb'}", "--stale-after", "1h"]) == 2
    assert "UNKNOWN: cluster b" in capsys.readouterr().out


def test_audit_verify_checks_each_stores_chain_and_says_which_broke(nats_server, tmp_path, uid, run, capsys):
    dbs = {c: tmp_path / f"{c}.duckdb" for c in "ab"}
    for c, db in dbs.items():
        _claimed(db, c)
        _audited_actions(nats_server, str(db), f"{uid}{c}", run)
    files = f"{dbs['a']},{dbs['b']}"
    assert main(["audit", "verify", "--dbs", files]) == 0
    out = capsys.readouterr().out
    assert f"cluster a ({dbs['a']}): audit chain intact: 4 rows" in out
    assert f"cluster b ({dbs['b']}): audit chain intact: 4 rows" in out

    Store(dbs["b"]).write(lambda con: con.execute("UPDATE audit SET actor = 'somebody-else' WHERE seq = 4"))
    assert main(["audit", "verify", "--dbs", files]) == 1
    out = capsys.readouterr().out
    assert f"cluster b ({dbs['b']}): BROKEN: row 4 (resume" in out
    assert f"cluster a ({dbs['a']}): audit chain intact" in out
    assert not [line for line in out.splitlines() if line.startswith("cluster a") and "BROKEN" in line]
    assert out.strip().splitlines()[-1].endswith(f"1 BROKEN or not read: cluster b ({dbs['b']})")
