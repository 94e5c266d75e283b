"""Config findings (health/config_findings.py): each kind with the cases that must raise it and the
look-alikes that must not, table-driven over the window features and limits; the reset read from
real sample sequences through health/window.py; and each kind on a real nats-server with real pull
clients and the real collector, in `status --json`'s `config_findings`."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from typing import Any

import nats
import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from jetwatch.core.embedded_server import free_port
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.health.config_findings import KINDS, config_findings, held_resets
from jetwatch.health.features import window_features
from tests.helpers import collecting, collector_settings, eventually, make_consumer, make_stream, rows
from tests.incident_library import Client
from tests.test_dashboard import APP
from tests.test_metrics import scrape

BASE: dict[str, Any] = {
    "samples": 12, "max_ack_pending": 100, "max_waiting": 512, "ack_wait_ns": 30e9, "filtered": False,
    "ack_pending_min": 10, "pending_min": 0, "waiting_max": 1, "acked": 50, "deliveries": 50,
    "stream_delivered": 50, "redelivered_first": 0, "redelivered_last": 0, "nak_count": 0,
    "ack_gap_max": 0.5, "reset_ts": np.nan, "reset_floor_before": np.nan, "reset_floor_after": np.nan,
}

CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("healthy", {}, set()),
    ("max_ack_pending held every sample while work waits", {"ack_pending_min": 100, "pending_min": 5},
     {"max_ack_pending_reached"}),
    ("at max_ack_pending but nothing waits (caught up)", {"ack_pending_min": 100, "pending_min": 0}, set()),
    ("max_ack_pending of one: strict order by choice", {"max_ack_pending": 1, "ack_pending_min": 1, "pending_min": 5},
     set()),
    ("too few samples to say always", {"samples": 2, "ack_pending_min": 100, "pending_min": 5}, set()),
    ("no max_ack_pending", {"max_ack_pending": -1, "ack_pending_min": 100, "pending_min": 5}, set()),
    ("pulls waiting at max_waiting", {"max_waiting": 4, "waiting_max": 4}, {"max_waiting_reached"}),
    ("pulls waiting one below max_waiting", {"max_waiting": 4, "waiting_max": 3}, set()),
    ("redelivered while acking, gaps longer than ack_wait",
     {"ack_wait_ns": 1e9, "ack_gap_max": 3.0, "deliveries": 60, "stream_delivered": 50}, {"ack_wait_short"}),
    ("redelivered gauge only (filtered consumer)",
     {"ack_wait_ns": 1e9, "ack_gap_max": 3.0, "filtered": True, "deliveries": 10, "stream_delivered": 90,
      "redelivered_last": 2}, {"ack_wait_short"}),
    ("long job kept alive with +WPI: long gaps, no redelivery", {"ack_wait_ns": 1e9, "ack_gap_max": 3.0}, set()),
    ("redelivered by naks, not by ack_wait",
     {"ack_wait_ns": 1e9, "ack_gap_max": 3.0, "deliveries": 60, "stream_delivered": 50, "nak_count": 10}, set()),
    ("redelivered, gaps shorter than ack_wait (a crash, not the setting)",
     {"ack_wait_ns": 5e9, "ack_gap_max": 3.0, "deliveries": 60, "stream_delivered": 50}, set()),
    ("redelivered, nothing acknowledged (STALLED's, not this)",
     {"ack_wait_ns": 1e9, "ack_gap_max": np.nan, "acked": 0, "deliveries": 60, "stream_delivered": 50}, set()),
    ("gap unknown (rhythm not computed)",
     {"ack_wait_ns": 1e9, "ack_gap_max": np.nan, "deliveries": 60, "stream_delivered": 50}, set()),
    ("reset back", {"reset_ts": 1.7e9, "reset_floor_before": 100, "reset_floor_after": 10}, {"reset"}),
    ("reset forward", {"reset_ts": 1.7e9, "reset_floor_before": 100, "reset_floor_after": 500}, {"reset"}),
]


def _columns(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    return {k: np.array([{**BASE, **r}[k] for r in rows], dtype=bool if k == "filtered" else float)
            for k in BASE}


@pytest.mark.parametrize(("name", "change", "kinds"), CASES, ids=[c[0] for c in CASES])
def test_each_kind_and_its_look_alikes(name: str, change: dict[str, Any], kinds: set[str]) -> None:
    found = config_findings(_columns([change]))[0]
    assert {f["kind"] for f in found} == kinds
    for f in found:
        assert f["kind"] in KINDS and f["reason"] and f["fix"] and f["numbers"]


def test_all_at_once_in_one_pass_and_the_quiet_ones_share_one_empty_list() -> None:
    found = config_findings(_columns([c[1] for c in CASES] * 100))
    assert [{f["kind"] for f in x} for x in found] == [c[2] for c in CASES] * 100
    empties = {id(x) for x in found if not x}
    assert len(empties) == 1


def test_the_reset_says_which_way() -> None:
    found = config_findings(_columns([c[1] for c in CASES if c[0].startswith("reset")]))
    assert [x[0]["numbers"]["way"] for x in found] == ["back", "forward"]
    assert "90 acknowledged messages will be delivered again" in found[0][0]["reason"]
    assert "400 messages after the ack floor were skipped" in found[1][0]["reason"]


def _samples(dcs: list[int], afs: list[int], created: list[str]) -> pd.DataFrame:
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    n = len(dcs)
    return pd.DataFrame({
        "account": ["A"] * n, "stream": ["S"] * n, "consumer": ["C"] * n,
        "ts": [t0 + dt.timedelta(seconds=5 * i) for i in range(n)], "created": created,
        "num_pending": [0] * n, "num_ack_pending": [0] * n, "num_waiting": [1] * n, "num_redelivered": [0] * n,
        "delivered_consumer_seq": dcs, "delivered_stream_seq": afs, "ack_floor_stream_seq": afs,
        "paused": [False] * n, "pinned_id": [None] * n, "oldest_unacked_age_seconds": [0.0] * n,
        "delivered_last_active": [None] * n, "ack_floor_last_active": [None] * n})


@pytest.mark.parametrize(("dcs", "afs", "created", "way"), [
    ([10, 20, 30, 0, 5], [10, 20, 30, 5, 10], ["2026-01-01T00:00:00Z"] * 5, "back"),
    ([10, 20, 30, 0, 5], [10, 20, 30, 90, 95], ["2026-01-01T00:00:00Z"] * 5, "forward"),
    ([10, 20, 30, 0, 5], [10, 20, 30, 30, 35], ["2026-01-01T00:00:00Z"] * 5, "ack_floor"),
    ([10, 20, 30, 0, 5], [10, 20, 30, 0, 5], ["2026-01-01T00:00:00Z"] * 3 + ["2026-01-01T00:00:14Z"] * 2, None),
    ([10, 20, 30, 40, 50], [10, 20, 30, 40, 50], ["2026-01-01T00:00:00Z"] * 5, None),
], ids=["back", "forward", "to the ack floor", "recreated: not a reset", "no reset"])
def test_a_reset_read_from_the_samples(dcs: list[int], afs: list[int], created: list[str], way: str | None) -> None:
    feats = window_features(_samples(dcs, afs, created))
    found = [f for f in config_findings({c: feats[c].to_numpy() for c in feats.columns})[0] if f["kind"] == "reset"]
    if way is None:
        assert not found
        return
    assert found[0]["numbers"]["way"] == way
    assert found[0]["numbers"]["at"] == "2026-01-01T00:00:15Z"
    assert found[0]["numbers"]["ack_floor_before"] == 30


# --- On a real nats-server, with real pull clients and the real collector -------------------------

async def _fetch(nc: Any, stream: str, consumer: str, batch: int, ack: bool) -> int:
    """One no_wait pull of up to `batch` messages, acknowledged or held; how many came."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    got = 0
    try:
        await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}",
                         json.dumps({"batch": batch, "no_wait": True}).encode(), reply=inbox)
        while got < batch:
            try:
                msg = await sub.next_msg(timeout=2)
            except Exception:  # nats' timeout (or asyncio's): the pull is over
                break
            if (msg.headers or {}).get("Status"):
                break
            got += 1
            if ack:
                await nc.request(msg.reply, b"+ACK", timeout=5)  # +ACK with a reply: confirmed
    finally:
        await sub.unsubscribe()
    return got


def _kept(findings: list[list[dict[str, Any]]]) -> np.ndarray:
    """The findings as the store keeps them (JSON), what the next cycle reads back."""
    return np.array([json.dumps(f) for f in findings], dtype=object)


def test_a_reset_older_than_the_window_stays_until_its_stated_time_and_says_so() -> None:
    """A reset found at t (in the window) is kept from the stored findings once the window no
    longer shows it, until `shown_for` after it; not onto a consumer with a newer reset, nor one
    recreated since; the words do not change from cycle to cycle (no rewrite every cycle)."""
    at = 1.7e9
    first = config_findings(_columns([{"reset_ts": at, "reset_floor_before": 100, "reset_floor_after": 10},
                                      {"reset_ts": at, "reset_floor_before": 0, "reset_floor_after": 8}, {}]))
    quiet = config_findings(_columns([{}, {}, {}]))  # the window has moved past both resets
    later = held_resets(quiet, _kept(first), at + 600, 3600.0, np.zeros(3, dtype=bool))
    [back], [fwd], none = later
    assert (back["kind"], back["numbers"]["way"], back["numbers"]["at"], back["numbers"]["shown_until"]) == (
        "reset", "back", "2023-11-14T22:13:20Z", "2023-11-14T23:13:20Z")
    assert back["reason"].endswith("; older than the health window, shown until 2023-11-14T23:13:20Z"), back["reason"]
    assert fwd["numbers"]["way"] == "forward" and none == []
    again = held_resets(quiet, _kept(later), at + 1200, 3600.0, np.zeros(3, dtype=bool))
    assert _kept(again).tolist() == _kept(later).tolist()  # the same words: nothing to write
    assert held_resets(quiet, _kept(later), at + 3600, 3600.0, np.zeros(3, dtype=bool)) == [[], [], []]  # expired
    assert held_resets(quiet, _kept(first), at + 600, 0.0, np.zeros(3, dtype=bool)) == [[], [], []]  # only in window
    assert held_resets(quiet, _kept(first), at + 600, 3600.0, np.array([True, False, False]))[0] == []  # recreated
    newer = config_findings(_columns([{"reset_ts": at + 500, "reset_floor_before": 10, "reset_floor_after": 10},
                                      {}, {}]))
    [only] = held_resets(newer, _kept(first), at + 600, 3600.0, np.zeros(3, dtype=bool))[0]
    assert only["numbers"]["way"] == "ack_floor" and "shown_until" not in only["numbers"]  # the newer, in the window


def test_each_config_finding_on_a_real_server_and_none_on_its_look_alike(nats_server, db_path, uid, run,
                                                                        monkeypatch):
    """max_ack_pending held at 2 while work waits; three clients pulling at max_waiting 2 (the
    third refused: 409 Exceeded MaxWaiting); two clients whose jobs outlast a 1 s ack_wait,
    redelivered while they work; a consumer reset back and one reset forward with
    `$JS.API.CONSUMER.RESET` (nats-server 2.14+). Look-alikes: the same with room (max_ack_pending
    50, max_waiting 10), jobs three times their ack_wait kept alive with +WPI, a consumer deleted and recreated
    under its name. Each finding in the store, `status --json`, /metrics' gauge and the Consumer page
    within a deadline, no look-alike with one, no verdict changed by one."""
    store_path = db_path
    expect = {"MAP": "max_ack_pending_reached", "MAXW": "max_waiting_reached", "AW": "ack_wait_short",
              "BACK": "reset", "FWD": "reset"}
    alike = ("MAP_OK", "MAXW_OK", "WPI", "RECREATED")
    streams = {k: f"{uid}_{k}" for k in (*expect, *alike)}

    async def scenario() -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        workers: list[Client] = []
        try:
            for stream in streams.values():
                await make_stream(api, stream, [f"{stream}.x"])
            config = {"MAP": {"max_ack_pending": 2}, "MAP_OK": {"max_ack_pending": 50},
                      "MAXW": {"max_waiting": 2}, "MAXW_OK": {"max_waiting": 10},
                      "AW": {"ack_wait": 1_000_000_000}, "WPI": {"ack_wait": 3_000_000_000}}
            for key, stream in streams.items():
                await make_consumer(api, stream, "c", **config.get(key, {}))
            for key in ("MAP", "MAP_OK", "AW", "WPI", "BACK", "FWD", "RECREATED"):
                for i in range(20):
                    await nc.request(f"{streams[key]}.x", str(i).encode(), timeout=5)
            for key in ("MAP", "MAP_OK"):  # pull and hold: in flight at 2 (MAP), 20 of 50 (MAP_OK)
                w = Client(nc, streams[key], "c", name=key, batch=5, expires_s=1.0)
                w.acking = False
                workers.append(w.start())
            for key in ("MAXW", "MAXW_OK"):  # three clients keep a long pull open each
                workers += [Client(nc, streams[key], "c", name=f"{key}{i}", batch=1, expires_s=5.0).start()
                            for i in range(3)]
            # Jobs three times ack_wait: of 3 s under 1 s (AW), of 9 s kept alive with +WPI every 0.3 s
            # under 3 s (WPI: the clients share the test's loop with the collector, and a loaded
            # machine stalled it for most of a second, long enough for a 1 s ack_wait to pass).
            for key, progress, job in (("AW", 0.0, 3.0), ("WPI", 0.3, 9.0)):
                workers += [Client(nc, streams[key], "c", name=f"{key}{i}", batch=1, expires_s=1.0, job_s=job,
                                   progress_s=progress).start() for i in range(2)]
            assert await _fetch(nc, streams["BACK"], "c", 10, ack=True) == 10  # ack floor 10
            assert await _fetch(nc, streams["FWD"], "c", 3, ack=False) == 3  # delivered 3, ack floor 0
            assert await _fetch(nc, streams["RECREATED"], "c", 10, ack=True) == 10

            settings = collector_settings(nats_server.url, store_path, tuple(streams.values()), interval=0.5,
                                          metrics_address=f"127.0.0.1:{free_port()}")
            async with collecting(settings) as collector:
                def found() -> dict[str, list[dict[str, Any]]]:
                    return {s: json.loads(f or "[]") for s, f in rows(
                        collector.store, "SELECT stream, config_findings::VARCHAR FROM verdicts_current")}

                await eventually(lambda: len(found()) == len(streams) and collector.cycles >= 4, timeout=60,
                                 message="every consumer judged a few times")
                for key, seq in (("BACK", 3), ("FWD", 9)):
                    reply = await api.reset(streams[key], "c", seq)
                    assert reply.get("reset_seq") == seq, reply
                await api.delete_consumer(streams["RECREATED"], "c")
                await make_consumer(api, streams["RECREATED"], "c")
                assert await _fetch(nc, streams["RECREATED"], "c", 5, ack=True) == 5

                def all_raised() -> bool:
                    """Every finding raised, and every consumer judged: the recreated one's row,
                    gone with the consumer it was, is back (judged as the new one)."""
                    now = found()
                    return set(now) == set(streams.values()) and all(
                        expect[k] in {f["kind"] for f in now[s]} for k, s in streams.items() if k in expect)

                await eventually(all_raised, timeout=90, interval=0.25,
                                 message=f"every config finding raised, every consumer judged: {expect}")
                got = found()
                # /metrics (the default cardinality, non_ok): every consumer with a finding, by kind.
                def gauged() -> dict[str, set[str]] | None:
                    series = scrape(collector.metrics_bound).get("jetwatch_consumer_config_finding", [])
                    out: dict[str, set[str]] = {}
                    for x in series:
                        out.setdefault(x.labels["stream"], set()).add(x.labels["kind"])
                    return out if all(expect[k] in out.get(s, set()) for k, s in streams.items() if k in expect) else None

                on_metrics = await eventually(gauged, timeout=30, message="each config finding on /metrics")
                assert not {s for k, s in streams.items() if k in alike} & set(on_metrics), on_metrics
        finally:
            for w in workers:
                await w.stop()
            await nc.close()
        statuses = [s for w in workers if w.name.startswith("MAXW") for s in w.stats.statuses]
        return got, statuses

    got, statuses = run(scenario())
    print("\nconfig findings:", {k: [(f["kind"], f["numbers"]) for f in got[s]] for k, s in streams.items()})
    for key, stream in streams.items():
        kinds = {f["kind"] for f in got[stream]}
        assert kinds == ({expect[key]} if key in expect else set()), (key, got[stream])
    assert "409" in statuses  # the refused pull, as the server answers it (Exceeded MaxWaiting)
    ways = {k: next(f for f in got[streams[k]] if f["kind"] == "reset")["numbers"] for k in ("BACK", "FWD")}
    assert (ways["BACK"]["way"], ways["BACK"]["ack_floor_before"], ways["BACK"]["ack_floor_after"]) == ("back", 10, 2)
    assert (ways["FWD"]["way"], ways["FWD"]["ack_floor_before"], ways["FWD"]["ack_floor_after"]) == ("forward", 0, 8)

    out = subprocess.run([sys.executable, "-m", "jetwatch", "status", "--db", store_path, "--json"],
                         capture_output=True, text=True, timeout=120, check=False)
    said = {c["stream"]: c for c in json.loads(out.stdout)}
    for key, stream in streams.items():
        assert {f["kind"] for f in said[stream]["config_findings"]} == ({expect[key]} if key in expect else set())
    # Beside the verdict, never in it.
    assert all(f["verdict"] != "CONFIG" for c in said.values() for f in c["findings"])

    # The Consumer page shows them beside the verdict, each with its fix.
    for k in [k for k in os.environ if k.startswith("JETWATCH_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("JETWATCH_DB", store_path)
    for key, title in (("AW", "ack_wait shorter than the work"), ("WPI", None)):
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params["stream"], at.query_params["consumer"] = streams[key], "c"
        at.run()
        at.switch_page("views/consumer.py").run()
        assert not at.exception, [e.message for e in at.exception]
        text = "\n".join(m.value for m in at.markdown).replace("\\", "")  # md() escapes
        if title is None:
            assert "Configuration findings" not in text
        else:
            assert "Configuration findings" in text and title in text and "**Fix:** raise ack_wait" in text, text[-2000:]


def test_a_reset_on_a_real_server_outlives_the_window_and_a_restart_until_its_stated_time(nats_server, db_path, uid,
                                                                                         run):
    """A consumer reset back on a real server, judged over a 3 s window: once the window has moved
    past the reset, the finding is still in the store and on /metrics, saying until when; a
    restarted collector keeps it; it goes once `--reset-shown-for` (15 s) has passed since the
    reset. On the old code it went with the window. (The restart comes some 5 s after the reset;
    15 s leaves that room twice over, and the test says so if it ever runs short.)"""
    import time

    stream = f"{uid}_RESETKEPT"
    window, shown_for = 3.0, 15.0

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        try:
            await make_stream(api, stream, [f"{stream}.x"])
            await make_consumer(api, stream, "c")
            for i in range(20):
                await nc.request(f"{stream}.x", str(i).encode(), timeout=5)
            assert await _fetch(nc, stream, "c", 10, ack=True) == 10  # ack floor 10
            settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.3, health_window=window,
                                          health_min_samples=3, health_min_span=1.0, reset_shown_for=shown_for,
                                          metrics_address=f"127.0.0.1:{free_port()}")

            def reset_found(store: Any) -> dict[str, Any] | None:
                got = rows(store, "SELECT config_findings::VARCHAR FROM verdicts_current WHERE stream = ?", [stream])
                return next((f for f in json.loads(got[0][0] or "[]") if f["kind"] == "reset"), None) if got else None

            async with collecting(settings) as collector:
                await eventually(lambda: collector.cycles >= 4, message="a few cycles before the reset")
                reset_at = time.time()
                assert (await api.reset(stream, "c", 3)).get("reset_seq") == 3
                found = await eventually(lambda: reset_found(collector.store), timeout=30, interval=0.2,
                                         message="the reset found in the window")
                assert found["numbers"]["way"] == "back" and "shown_until" not in found["numbers"], found
                held = await eventually(lambda: (f := reset_found(collector.store)) and "shown_until" in f["numbers"]
                                        and f, timeout=30, interval=0.2, message="the reset held past the window")
                # The window no longer holds it: it has moved past the last sample from before the reset
                # (the pair of samples that shows the reset; that one can be a cycle older than the reset).
                [(before,)] = rows(collector.store, "SELECT max(ts) FROM samples WHERE stream = ? AND ts <= ?",
                                   [stream, dt.datetime.fromtimestamp(reset_at, dt.UTC)])
                assert time.time() - before.timestamp() > window
                assert held["numbers"]["at"] == found["numbers"]["at"] and held["numbers"]["way"] == "back"
                assert f"older than the health window, shown until {held['numbers']['shown_until']}" in held["reason"]
                series = scrape(collector.metrics_bound).get("jetwatch_consumer_config_finding", [])
                assert any(x.labels["stream"] == stream and x.labels["kind"] == "reset" for x in series), series
            async with collecting(settings) as again:  # a restarted collector keeps it, from the store
                await eventually(lambda: again.cycles >= 3, message="three cycles after the restart")
                assert time.time() - reset_at < shown_for - 3, "the restart must come well before the stated time"
                assert reset_found(again.store) == held
                until = dt.datetime.strptime(held["numbers"]["shown_until"], "%Y-%m-%dT%H:%M:%SZ").replace(
                    tzinfo=dt.UTC).timestamp()
                await eventually(lambda: reset_found(again.store) is None, timeout=shown_for + 15, interval=0.3,
                                 message="the reset gone after its stated time")
                assert time.time() >= until
        finally:
            await nc.close()

    run(scenario())
