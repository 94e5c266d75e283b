"""Thresholds per consumer from its metadata, and silences: against a real nats-server with real
clients, the real collector, a real Alertmanager, /metrics, `jetwatch silence` and `status --json`."""

from __future__ import annotations

import datetime as dt
import json
import logging
import subprocess
import sys
from pathlib import Path

import nats
import pytest

from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.dashboard import data
from jetwatch.demo.workers import PullWorker
from jetwatch.health import silences, thresholds
from jetwatch.store.database import Store
from tests.helpers import (
    clean_env,
    collecting,
    collector_settings,
    eventually,
    judged,
    make_consumer,
    make_stream,
    publish,
    rows,
)
from tests.test_alerting import ALERTMANAGER, Webhook, alertmanager
from tests.test_metrics import scrape


def jetwatch(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jetwatch.cli", *argv], capture_output=True, text=True, timeout=120,
                          env=clean_env())


def status_json(db: str, stream: str) -> dict[str, dict]:
    done = jetwatch("status", "--json", "--db", db, "--stream", stream)
    assert done.returncode == 0, done.stderr
    return {c["consumer"]: c for c in json.loads(done.stdout)}


# -- thresholds from metadata ---------------------------------------------------------------------

def test_the_parser_reads_natscli_keys_jetwatchs_own_and_says_what_it_cannot():
    own = thresholds.from_metadata({
        "io.nats.monitor.last-ack-critical": "1m30s", "io.nats.monitor.last-delivery-critical": "2m",
        "io.jetwatch.no_pullers_after": "45s", "io.nats.monitor.waiting-critical": "20",
        "io.jetwatch.saturation_ratio": "2", "io.jetwatch.nope": "1", "_nats.req.level": "0"})
    assert own.values == {"stalled_after": 90.0, "no_pullers_after": 45.0, "pin_idle_after": 120.0}
    assert own.sources["stalled_after"] == "io.nats.monitor.last-ack-critical"
    assert own.sources["no_pullers_after"] == "io.jetwatch.no_pullers_after"  # jetwatch's own key wins
    assert "io.nats.monitor.waiting-critical" in own.not_applied
    assert any("saturation_ratio" in p and "out of range" in p for p in own.problems)
    assert any("'nope'" in p for p in own.problems)
    off = thresholds.from_metadata({"io.nats.monitor.enabled": "false", "io.nats.monitor.last-ack-critical": "1m"})
    assert off.values == {} and "io.nats.monitor.last-ack-critical" in off.not_applied
    for bad in ("soon", "5 m", "-1m", "", "1m garbage"):
        assert thresholds.from_metadata({"io.nats.monitor.last-ack-critical": bad}).problems, bad
    assert thresholds.go_duration("1h30m") == 5400.0 and thresholds.go_duration("1d") == 86400.0


def test_metadata_thresholds_are_read_from_a_real_consumer_and_judge_it_alone(nats_server, db_path, uid, run, caplog):
    """Three consumers held at max_ack_pending by workers that acknowledge nothing: the one whose
    metadata says natscli's `last-ack-critical: 2s` is STALLED within seconds; the one without
    metadata waits for the setting; the one whose value cannot be read is logged and waits too."""
    stream = f"{uid}_META"
    store = Store(db_path)
    caplog.set_level(logging.WARNING, logger="jetwatch.collector")
    metadata = {"quick": {"io.nats.monitor.last-ack-critical": "2s", "io.nats.monitor.waiting-critical": "5"},
                "plain": {}, "garbled": {"io.nats.monitor.last-ack-critical": "soon"}}

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.>"])
        workers = []
        for name, meta in metadata.items():
            await make_consumer(api, stream, name, filter_subject=f"{uid}.{name}", max_ack_pending=2,
                                ack_wait=int(300e9), **({"metadata": meta} if meta else {}))
            await publish(nc, f"{uid}.{name}", 5)
            worker = PullWorker(nc, stream, name, name=f"stuck-{name}", batch=2)
            worker.acking = False
            workers.append(worker.start())
        info = await api.consumer_info(stream, "quick")
        assert info["config"]["metadata"]["io.nats.monitor.last-ack-critical"] == "2s"  # the server kept it
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.3, health_window=60.0,
                                      health_min_samples=3, health_min_span=1.0, stalled_after=600.0)
        verdict = "SELECT consumer, verdict, findings FROM verdicts_current WHERE stream = ?"
        try:
            async with collecting(settings) as collector:
                await eventually(lambda: any(r[0] == "quick" and r[1] == "STALLED" for r in rows(store, verdict, [stream])),
                                 timeout=30, message="quick judged STALLED by its own threshold")
                cycles = collector.cycles
                await eventually(lambda: collector.cycles >= cycles + 3, message="three more cycles")
                now = {r[0]: r for r in rows(store, verdict, [stream])}
                assert now["quick"][1] == "STALLED"
                assert json.loads(now["quick"][2])[0]["numbers"]["holder"] == "at_limit"
                assert now["plain"][1] != "STALLED" and now["garbled"][1] != "STALLED", now
        finally:
            for worker in workers:
                await worker.stop()
            await nc.close()

    run(scenario())
    logged = [r.getMessage() for r in caplog.records if r.name == "jetwatch.collector"]
    assert any("garbled" in m and "io.nats.monitor.last-ack-critical" in m and "soon" in m for m in logged), logged

    said = status_json(db_path, stream)
    assert said["quick"]["thresholds"]["from_metadata"] == {
        "stalled_after": {"value": 2.0, "key": "io.nats.monitor.last-ack-critical"}}
    assert "io.nats.monitor.waiting-critical" in said["quick"]["thresholds"]["not_applied"]
    assert said["plain"]["thresholds"] == {"from_metadata": {}, "not_applied": {}, "problems": []}
    assert said["garbled"]["thresholds"]["from_metadata"] == {}
    assert "soon" in said["garbled"]["thresholds"]["problems"][0]


# -- silences -------------------------------------------------------------------------------------

def _silenced_series(address: tuple[str, int], stream: str) -> dict[str, str]:
    """consumer -> verdict of each jetwatch_consumer_silenced series of `stream` on /metrics."""
    return {s.labels["consumer"]: s.labels["verdict"] for s in scrape(address).get("jetwatch_consumer_silenced", [])
            if s.labels["stream"] == stream and s.value == 1.0}


@pytest.mark.skipif(not Path(ALERTMANAGER).exists(), reason="Debian's prometheus-alertmanager: `make system-deps`")
def test_a_silence_is_set_shown_held_and_ended_by_expiry_or_a_worse_verdict(nats_server, db_path, uid, run, tmp_path):
    """Two consumers with work and nobody pulling (NO_PULLERS, alerting). `jetwatch silence` acknowledges
    both: their verdicts stay NO_PULLERS everywhere, their alerts resolve at Alertmanager saying why,
    /metrics exports jetwatch_consumer_silenced, `status --json` and `check` say it. A second silence
    on `idle`, of seconds, replaces its first, then expires and its alert fires again; `turns` gets a worker that acknowledges nothing, turns STALLED,
    and that ends its silence at once (an hour early): the STALLED alert fires. Both ends audited."""
    stream = f"{uid}_HUSH"
    store = Store(db_path)
    hook = Webhook()

    async def scenario(am_url: str) -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.>"])
        for name in ("idle", "turns"):
            await make_consumer(api, stream, name, filter_subject=f"{uid}.{name}", ack_wait=int(1e9))
            await publish(nc, f"{uid}.{name}", 3)
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.3, health_window=4.0,
                                      health_min_samples=3, health_min_span=1.0, alert_after=0.0, alertmanager=am_url,
                                      metrics_address="127.0.0.1:0")
        worker = PullWorker(nc, stream, "turns", name="takes-and-holds")
        worker.acking = False

        def silence(name: str, length: str) -> subprocess.CompletedProcess[str]:
            return jetwatch("silence", stream, name, "--for", length, "--note", f"restarting {name}'s workers",
                            "--verdict", "no_pullers", "--yes", "--actor", "ana", "--db", db_path)

        def alerts(consumer: str, status: str) -> list[dict]:
            return [a for _, s, a in hook.alerts(stream) if s == status and a["labels"]["consumer"] == consumer]

        try:
            async with collecting(settings) as collector:
                for name in ("idle", "turns"):
                    await eventually(lambda n=name: alerts(n, "firing"), timeout=30, message=f"{name}'s alert fires")
                # An hour each, so that nothing below races the clock while it checks that they hold;
                # idle's is replaced by a short one afterwards, to end by expiry.
                for name in ("idle", "turns"):
                    done = silence(name, "1h")
                    assert done.returncode == 0, done.stdout + done.stderr
                    assert "NO_PULLERS silenced until" in done.stdout
                # Held back: resolved at Alertmanager, saying the silence; the verdict stays.
                for name in ("idle", "turns"):
                    got = await eventually(lambda n=name: alerts(n, "resolved"), timeout=30,
                                           message=f"{name}'s alert resolved by the silence")
                    assert "silenced by ana" in got[0]["annotations"]["silenced"]
                    assert f"restarting {name}'s workers" in got[0]["annotations"]["silenced"]
                await eventually(lambda: _silenced_series(collector.metrics_bound, stream) ==
                                 {"idle": "NO_PULLERS", "turns": "NO_PULLERS"}, message="silenced on /metrics")
                verdicts = dict(rows(store, "SELECT consumer, verdict FROM verdicts_current WHERE stream = ?", [stream]))
                assert verdicts == {"idle": "NO_PULLERS", "turns": "NO_PULLERS"}, "a silence never hides the verdict"
                said = status_json(db_path, stream)
                assert said["idle"]["verdict"] == "NO_PULLERS" and said["idle"]["level"] == "critical"
                assert said["idle"]["silence"]["by"] == "ana" and said["idle"]["silence"]["verdict"] == "NO_PULLERS"
                check = jetwatch("check", "--db", db_path, "--stream", stream)
                assert check.returncode == 0 and "silenced:" in check.stdout, check.stdout

                # A second silence on idle replaces its first (ended, saying so) and expires in seconds,
                # while turns' part runs.
                done = silence("idle", "2s")
                assert done.returncode == 0 and "NO_PULLERS silenced until" in done.stdout, done.stdout + done.stderr

                # Worse: a worker takes the work and acknowledges nothing; ack_wait (1s) passes: STALLED.
                worker.start()
                await eventually(lambda: alerts("turns", "firing") and
                                 alerts("turns", "firing")[-1]["labels"]["verdict"] == "STALLED",
                                 timeout=40, message="the STALLED alert, not held back by NO_PULLERS' silence")
                ended = ("SELECT consumer, end_reason FROM silences WHERE stream = ? AND ended_at IS NOT NULL "
                         "ORDER BY ended_at")
                await eventually(lambda: dict(rows(store, ended, [stream])).get("turns"), message="turns' silence ended")
                # Another alerting verdict ended it (STALLED, or REDELIVERING on the way there), an hour early.
                assert dict(rows(store, ended, [stream]))["turns"].startswith("the verdict became ")

                # Expired: idle's alert fires again, its silence ends, /metrics no longer says it.
                await eventually(lambda: len(alerts("idle", "firing")) >= 2, timeout=40,
                                 message="idle's alert fires again once its silence expired")
                assert [r for c, r in rows(store, ended, [stream]) if c == "idle"] == [
                    "replaced by a new silence by ana", "expired"]
                await eventually(lambda: _silenced_series(collector.metrics_bound, stream) == {},
                                 message="no silence on /metrics")
                assert status_json(db_path, stream)["idle"]["silence"] is None
        finally:
            await worker.stop()
            await nc.close()

    with alertmanager(tmp_path, hook.url) as am_url:
        try:
            run(scenario(am_url))
        finally:
            hook.close()
    audited = rows(store, "SELECT consumer, actor, origin, phase, outcome FROM audit WHERE action = 'silence' "
                          "AND stream = ? ORDER BY seq", [stream])
    assert ("idle", "ana", "cli", "intent", "pending") in audited and ("idle", "ana", "cli", "outcome", "ok") in audited
    assert ("idle", "jetwatch collector", "collector", "event", "expired") in audited
    assert ("turns", "jetwatch collector", "collector", "event", "ended") in audited
    verify = jetwatch("audit", "verify", "--db", db_path)
    assert verify.returncode == 0, verify.stdout
    said: dict[str, list[str]] = {}  # consumer -> its actions' summaries, newest first
    for r in data.audit_actions(data.audit(store)).itertuples():
        if r.stream == stream:
            said.setdefault(r.consumer, []).append(r.summary)
    assert said["idle"] == [f"ana silenced {stream} / idle: expired, silence ended: expired",
                            f"ana silenced {stream} / idle: ok"], said
    assert len(said["turns"]) == 1 and said["turns"][0].startswith(f"ana silenced {stream} / turns: ended, silence ended: the verdict became "), said


def test_a_silence_is_refused_when_it_cannot_hold(nats_server, db_path, uid, run):
    """Nothing alerting to silence, a verdict other than the one seen, no note, too long: refused
    before anything is kept, and audited as refused."""
    stream = f"{uid}_NOPE"
    store = Store(db_path)

    run(judged(nats_server.url, db_path, stream, uid,
               {"calm": ({"filter_subject": f"{uid}.calm"}, 0), "idle": ({"filter_subject": f"{uid}.idle"}, 2)},
               {"calm": "OK", "idle": "NO_PULLERS"}))
    for argv, said in ((["calm", "--for", "1h", "--note", "x"], "which raises no alert"),
                       (["idle", "--for", "1h", "--note", "x", "--verdict", "LAGGING"], "you saw LAGGING"),
                       (["idle", "--for", "1h", "--note", "  "], "say why in a note"),
                       (["idle", "--for", "25h", "--note", "x"], "at most 1 d")):
        done = jetwatch("silence", stream, *argv, "--yes", "--actor", "ana", "--db", db_path)
        assert done.returncode == 1 and said in done.stdout, done.stdout + done.stderr
    assert rows(store, "SELECT count(*) FROM silences WHERE stream = ?", [stream]) == [(0,)]
    outcomes = [r[0] for r in rows(store, "SELECT outcome FROM audit WHERE action = 'silence' AND phase = 'outcome' "
                                          "AND stream = ?", [stream])]
    assert outcomes == ["refused"] * 4


def test_what_holds_a_silence_and_what_ends_it():
    now = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)
    later = now + dt.timedelta(minutes=30)
    assert silences.end_reason("STALLED", "STALLED", later, now) is None
    for calmer in ("OK", "PAUSED", "COLLECTING"):  # a recovery does not end it: a relapse stays acknowledged
        assert silences.end_reason(calmer, "STALLED", later, now) is None
    assert "became LAGGING" in silences.end_reason("LAGGING", "STALLED", later, now)  # another cause
    assert "became STALLED" in silences.end_reason("STALLED", "LAGGING", later, now)
    assert silences.end_reason("STALLED", "STALLED", now, now) == "expired"


# -- the pages (AppTest) --------------------------------------------------------------------------

def test_pages_show_the_thresholds_a_consumer_sets_and_a_silence_set_from_the_consumer_page(
        nats_server, db_path, uid, run, monkeypatch):
    """A real consumer with natscli's keys in its metadata and work nobody pulls (NO_PULLERS), judged
    by the real collector. The Consumer page says which thresholds came from metadata; an operator
    silences the verdict there (confirmed, audited); the verdict stays NO_PULLERS on the Fleet and
    the Consumer page, each saying the silence beside it."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from tests.helpers import operators_file
    from tests.test_dashboard import APP, frame
    from tests.test_dashboard_actions import login

    stream = f"{uid}_PAGE"
    store = Store(db_path)
    meta = {"io.nats.monitor.last-delivery-critical": "2s", "io.nats.monitor.unprocessed-critical": "100",
            "io.jetwatch.lagging_age": "later"}

    run(judged(nats_server.url, db_path, stream, uid, {"idle": ({"metadata": meta}, 3)}, {"idle": "NO_PULLERS"}))
    for k in [k for k in __import__("os").environ if k.startswith("JETWATCH_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("JETWATCH_DB", db_path)
    monkeypatch.setenv("JETWATCH_STALE_AFTER", "1h")
    monkeypatch.setenv("JETWATCH_OPERATORS_FILE", operators_file(Path(db_path).parent, "ana"))
    st.cache_data.clear()

    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["stream"], at.query_params["consumer"] = stream, "idle"
    at.run()
    at.switch_page("views/consumer.py").run()
    assert not at.exception, [e.message for e in at.exception]
    own = frame(at, "Threshold")
    by_name = dict(zip(own["Threshold"], own["From"]))
    assert by_name == {"no_pullers_after": "metadata io.nats.monitor.last-delivery-critical",
                       "pin_idle_after": "metadata io.nats.monitor.last-delivery-critical"}
    captions = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "io.nats.monitor.unprocessed-critical is not applied" in captions
    assert any("io.jetwatch.lagging_age" in w.value.replace("\\", "") and "later" in w.value for w in at.warning)
    assert not any("Silenced" in w.value for w in at.warning)

    login(at)
    at.text_input(key="silence_note").input("restarting the pullers, INC-7").run()
    assert at.button(key="action_silence").label == "Silence NO_PULLERS"
    at.button(key="action_silence").click().run()
    question = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert f"Silence the alerts of account $G, stream {stream}, consumer idle for 1 h" in question
    at.button(key="action_confirm").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert rows(store, "SELECT verdict, actor, note FROM silences WHERE stream = ?", [stream]) == [
        ("NO_PULLERS", "ana", "restarting the pullers, INC-7")]
    assert [r[0] for r in rows(store, "SELECT phase FROM audit WHERE action = 'silence' AND stream = ? ORDER BY seq",
                               [stream])] == ["intent", "outcome"]
    at.run()
    banner = [w.value.replace("\\", "") for w in at.warning if "Silenced" in w.value]
    assert banner and "NO_PULLERS silenced by ana until" in banner[0] and "INC-7" in banner[0], banner
    assert any(m.value.startswith(":red-badge[NO_PULLERS]") or "NO_PULLERS" in m.value for m in at.markdown)
    assert frame(at, "State")["State"].iloc[0] == "holds"

    at.switch_page("views/fleet.py").run()
    assert not at.exception, [e.message for e in at.exception]
    table = frame(at, "Silenced")
    row = table[table["Stream"] == stream].iloc[0]
    assert row["Verdict"] == "NO_PULLERS" and row["Silenced"].startswith("🔕 ana, ")
    line = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "Alerts held back for 1 consumer" in line and f"{stream}/idle NO_PULLERS silenced by ana" in line
