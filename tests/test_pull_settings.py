"""Pull settings the workers announce (core/pull_announce.py, collectors/pull_settings.py) and the
config findings read from them (health/config_findings.py `pull_findings`): the pure rule
table-driven, with its look-alikes and the server versions that change how `min_pending` and
`min_ack_pending` combine; the announcement's bounds; and on a real nats-server, real pull workers
announcing self-defeating settings (the server doing what the finding says it does) and sane ones,
through the real collector to the store, `status --json` and the Consumer page."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

import nats
import pytest
from streamlit.testing.v1 import AppTest

from jetwatch.core.embedded_server import free_port
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.core.pin_announce import BadAnnouncement, PinAnnouncer
from jetwatch.core.pull_announce import (
    PullAnnouncer,
    PullSettings,
    announce_subject,
    parse_pull_announcement,
)
from jetwatch.demo.workers import PullWorker
from jetwatch.health.config_findings import KINDS, either_threshold, pull_findings
from tests.helpers import collecting, collector_settings, eventually, make_consumer, make_stream, publish, rows
from tests.test_dashboard import APP
from tests.test_metrics import scrape

S = 1_000_000_000
PINNED = {"priority_policy": "pinned_client", "priority_timeout_ns": 120 * S, "max_ack_pending": 1000,
          "priority_groups": ["jobs"]}
OVERFLOW = {"priority_policy": "overflow", "priority_timeout_ns": None, "max_ack_pending": 100,
            "priority_groups": ["jobs"]}
PLAIN = {"priority_policy": None, "priority_timeout_ns": None, "max_ack_pending": 1000, "priority_groups": None}


def worker(name: str = "w1", **pull: Any) -> dict[str, Any]:
    """A `pull_settings` row as the store keeps it (and the collector holds it)."""
    return {"name": name, "verification": "verified", "group_name": "jobs", "expires_ns": 30 * S, "batch": 10,
            "min_pending": None, "min_ack_pending": None, "priority": None, "no_wait": False, **pull}


CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], str | None, set[str]]] = [
    ("pinned, expiry well under priority_timeout", PINNED, [worker(expires_ns=30 * S)], None, set()),
    ("pinned, expiry above priority_timeout", PINNED, [worker(expires_ns=300 * S)], None,
     {"pull_expires_past_pin_timeout"}),
    ("pinned, expiry equal to priority_timeout", PINNED, [worker(expires_ns=120 * S)], None,
     {"pull_expires_past_pin_timeout"}),
    ("pinned, a pull that never expires", PINNED, [worker(expires_ns=None)], None, {"pull_expires_past_pin_timeout"}),
    ("pinned, no_wait pulls never wait", PINNED, [worker(expires_ns=None, no_wait=True)], None, set()),
    ("pinned, a long pull outside the group (never pinned)", PINNED, [worker(group_name=None, expires_ns=300 * S)],
     None, set()),
    ("long expiry on an overflow consumer: no pin to lose", OVERFLOW, [worker(expires_ns=300 * S)], None, set()),
    ("overflow, min_ack_pending below max_ack_pending", OVERFLOW, [worker(min_ack_pending=50)], None, set()),
    ("overflow, min_ack_pending at max_ack_pending", OVERFLOW, [worker(min_ack_pending=100)], "2.14.0",
     {"min_ack_pending_unreachable"}),
    ("overflow, min_ack_pending above max_ack_pending", OVERFLOW, [worker(min_ack_pending=500)], "2.11.3",
     {"min_ack_pending_unreachable"}),
    ("overflow, both thresholds, either enough (2.12.5+)", OVERFLOW, [worker(min_pending=10, min_ack_pending=100)],
     "2.12.5", {"min_ack_pending_unreachable"}),
    ("overflow, both thresholds, both needed (2.12.4)", OVERFLOW, [worker(min_pending=10, min_ack_pending=100)],
     "2.12.4", {"min_ack_pending_unreachable"}),
    ("overflow, no max_ack_pending (unlimited)", {**OVERFLOW, "max_ack_pending": -1}, [worker(min_ack_pending=100)],
     None, set()),
    ("overflow, min_pending only", OVERFLOW, [worker(min_pending=1000)], None, set()),
    ("min_pending on a plain consumer", PLAIN, [worker(group_name=None, min_pending=10)], None,
     {"min_pending_without_overflow"}),
    ("min_ack_pending on a pinned consumer", PINNED, [worker(min_ack_pending=1)], None,
     {"min_pending_without_overflow"}),
    ("a plain worker with plain settings", PLAIN, [worker(group_name=None)], None, set()),
    ("no announcement", PINNED, [], None, set()),
    ("pinned, a pull that never expires in a group the consumer lacks (never served)", PINNED,
     [worker(group_name="other", expires_ns=None)], None, set()),
    ("min_ack_pending in a group the consumer lacks", PINNED, [worker(group_name="other", min_ack_pending=1)], None,
     set()),
    ("overflow, min_ack_pending at max_ack_pending in a group the consumer lacks", OVERFLOW,
     [worker(group_name="other", min_ack_pending=100)], None, set()),
]


@pytest.mark.parametrize(("name", "limits", "announced", "version", "kinds"), CASES, ids=[c[0] for c in CASES])
def test_each_pull_setting_finding_and_its_look_alikes(name: str, limits: dict[str, Any],
                                                       announced: list[dict[str, Any]], version: str | None,
                                                       kinds: set[str]) -> None:
    found = pull_findings(limits, announced, version)
    assert {f["kind"] for f in found} == kinds
    for f in found:
        assert f["kind"] in KINDS and f["reason"] and f["fix"] and f["numbers"]
        json.dumps(f)  # stored as JSON


@pytest.mark.parametrize(("version", "either"), [
    ("2.11.0", False), ("2.11.17", False), ("2.12.4", False), ("2.12.5-RC.1", True), ("2.12.5", True),
    ("2.14.3", True), ("2.15.0-dev", True), ("v2.12.10", True), ("", None), (None, None), ("garbage", None),
])
def test_how_the_two_thresholds_combine_by_server_version(version: str | None, either: bool | None) -> None:
    """From the server's source: an overflow pull is served when either threshold is met from
    2.12.5 (its release candidates too), only when both are before it (all of 2.11, 2.12.0-2.12.4)."""
    assert either_threshold(version) is either


def test_the_words_follow_the_server_version() -> None:
    both = [worker(min_pending=10, min_ack_pending=100)]
    [new] = pull_findings(OVERFLOW, both, "2.14.0")
    assert "get work only from min_pending" in new["reason"] and new["numbers"]["either_threshold"] is True
    [old] = pull_findings(OVERFLOW, both, "2.11.9")
    assert "only when both min_pending and min_ack_pending are met" in old["reason"]
    [unknown] = pull_findings(OVERFLOW, both, None)
    assert "before 2.12.5" in unknown["reason"] and "from 2.12.5" in unknown["reason"]
    [alone] = pull_findings(OVERFLOW, [worker(min_ack_pending=100)], "2.11.9")
    assert "never get a new message" in alone["reason"] and "max_ack_pending is 100" in alone["reason"]
    many = [worker(f"w{i}", expires_ns=300 * S) for i in range(6)]
    [pin] = pull_findings(PINNED, [*many, worker("x", expires_ns=300 * S, verification="no_connz")])
    assert pin["reason"].startswith("connections w0 (verified), w1 (verified), w2 (verified) and 4 more announced "
                                    "pulling with expires 300 s; priority_timeout is 120 s")
    assert pin["numbers"] == {"priority_timeout_seconds": 120, "expires_seconds": 300, "workers": 7}


def test_announcements_are_bounded_validated_and_tolerant_of_new_fields() -> None:
    class Conn:
        options = {"name": "w1"}
        _server_info = {"client_id": 7, "server_id": "SRV"}

    ann = PullAnnouncer(Conn(), "S", "C", policy="overflow").announcement(
        PullSettings.of_request({"batch": 5, "expires": 2 * S, "group": "jobs", "min_ack_pending": 3}, "overflow"))
    subject = announce_subject("S", "C")
    assert parse_pull_announcement(subject, ann.encode()) == ann
    doc = json.loads(ann.encode())
    assert parse_pull_announcement(subject, json.dumps({**doc, "later": [1, 2]}).encode()) == ann  # newer workers
    for bad, why in [({**doc, "pull": {**doc["pull"], "priority": 10}}, "priority"),
                     ({**doc, "pull": {**doc["pull"], "batch": -1}}, "batch"),
                     ({**doc, "pull": {**doc["pull"], "expires_ns": True}}, "expires_ns"),
                     ({**doc, "pull": {**doc["pull"], "policy": "failover"}}, "policy"),
                     ({**doc, "pull": "fast"}, "pull"), ({**doc, "name": "x" * 300}, "name"),
                     ({**doc, "pull": {**doc["pull"], "group": "g" * 5000}}, "bytes")]:
        with pytest.raises(BadAnnouncement, match=why):
            parse_pull_announcement(subject, json.dumps(bad).encode())
    with pytest.raises(BadAnnouncement, match="arrived on"):
        parse_pull_announcement(announce_subject("S", "OTHER"), ann.encode())
    with pytest.raises(BadAnnouncement):  # a pin announcement is not a pull announcement
        parse_pull_announcement(subject, PinAnnouncer(Conn(), "S", "C").announcement("PIN").encode())


def test_a_worker_announces_when_its_settings_change_and_once_a_minute_otherwise(run) -> None:
    sent: list[bytes] = []
    now = [0.0]

    class Conn:
        options = {"name": "w1"}
        _server_info: dict[str, Any] = {}

        async def publish(self, subject: str, data: bytes) -> None:
            sent.append(data)

    async def scenario() -> list[bool]:
        a = PullAnnouncer(Conn(), "S", "C", clock=lambda: now[0])
        said = [await a.pulling({"batch": 1, "expires": S}), await a.pulling({"batch": 1, "expires": S})]
        now[0] = 59.0
        said.append(await a.pulling({"batch": 1, "expires": S}))
        said.append(await a.pulling({"batch": 2, "expires": S}))  # changed
        now[0] = 120.0
        said.append(await a.pulling({"batch": 2, "expires": S}))  # a minute on
        return said

    assert run(scenario()) == [True, False, False, True, True]
    assert json.loads(sent[-1])["pull"]["batch"] == 2


# --- on a real server, with real pull workers and the real collector ----------------------------

async def _hold(nc: Any, stream: str, batch: int) -> int:
    """One pull of `batch` in the group, never acknowledged (in flight until ack_wait); how many came."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox, max_msgs=batch)
    await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.c",
                     json.dumps({"batch": batch, "expires": 2 * S, "group": "jobs"}).encode(), reply=inbox)
    got = 0
    while got < batch:
        msg = await sub.next_msg(timeout=5)
        got += not (msg.headers or {}).get("Status")
    return got


def test_self_defeating_pull_settings_on_a_real_server_and_none_for_sane_ones(nats_server, db_path, uid, run,
                                                                                monkeypatch):
    """PIN: a pinned_client consumer (priority_timeout 2 s) whose worker pulls with a 5 s expiry;
    the server unpins it while its pull waits and refuses that pull (423) when the next message
    comes. OVF: an overflow consumer (max_ack_pending 5) with a standby pulling at min_ack_pending
    5: with 3 in flight it gets nothing, where the look-alike standby (min_ack_pending 2) gets work
    (with 5 in flight no new message goes to anyone: max_ack_pending).
    PLAIN: min_pending on a consumer without a policy: every pull refused (400). Look-alikes:
    PIN_OK (a 1 s expiry under a 30 s timeout), OVF_OK, PLAIN_OK (a plain worker announcing)."""
    keys = ("PIN", "PIN_OK", "OVF", "OVF_OK", "PLAIN", "PLAIN_OK")
    streams = {k: f"{uid}_{k}" for k in keys}
    expect = {"PIN": "pull_expires_past_pin_timeout", "OVF": "min_ack_pending_unreachable",
              "PLAIN": "min_pending_without_overflow"}
    settings = collector_settings(nats_server.url, db_path, tuple(streams.values()), interval=0.5,
                                  monitor_url=(nats_server.monitor_url,), metrics_address=f"127.0.0.1:{free_port()}")
    workers: dict[str, PullWorker] = {}

    async def scenario() -> dict[str, list[dict[str, Any]]]:
        conns = []

        async def connect(name: str) -> Any:
            nc = await nats.connect(nats_server.url, name=name)
            conns.append(nc)
            return nc

        admin = await connect("admin")
        api = JetStreamAPI(admin)
        for stream in streams.values():
            await make_stream(api, stream, [f"{stream}.x"])
        await make_consumer(api, streams["PIN"], "c", "pinned_client", timeout_s=2)
        await make_consumer(api, streams["PIN_OK"], "c", "pinned_client", timeout_s=30)
        for key in ("OVF", "OVF_OK"):
            await make_consumer(api, streams[key], "c", "overflow", max_ack_pending=5, ack_wait=300 * S)
        for key in ("PLAIN", "PLAIN_OK"):
            await make_consumer(api, streams[key], "c")
        for key in ("OVF", "OVF_OK", "PLAIN", "PLAIN_OK"):
            await publish(admin, f"{streams[key]}.x", 20)
        try:
            async with collecting(settings) as collector:
                async def start(key: str, name: str, policy: str | None, **kw: Any) -> PullWorker:
                    nc = await connect(name)
                    w = PullWorker(nc, streams[key], "c", name=name,
                                   pull_announcer=PullAnnouncer(nc, streams[key], "c", policy=policy), **kw)
                    workers[name] = w.start()
                    return w

                await start("PIN", "pin-long", "pinned_client", group="jobs", batch=10, expires_s=5.0)
                await start("PIN_OK", "pin-short", "pinned_client", group="jobs", batch=10, expires_s=1.0)
                for key in ("OVF", "OVF_OK"):  # one pull of 3, held: in flight 3 of 5
                    assert await _hold(admin, streams[key], 3) == 3
                await start("OVF", "standby-dead", "overflow", group="jobs", batch=1, expires_s=1.0,
                            min_ack_pending=5)
                await start("OVF_OK", "standby-ok", "overflow", group="jobs", batch=1, expires_s=1.0,
                            min_ack_pending=2)
                await start("PLAIN", "plain-min", None, batch=5, expires_s=1.0, min_pending=10)
                await start("PLAIN_OK", "plain-ok", None, batch=5, expires_s=1.0)
                await publish(admin, f"{streams['PIN']}.x", 1)  # pinned: its 5 s pull waits for more
                await eventually(lambda: workers["pin-long"].stats.pins, message="the long puller pinned")
                pinned_at = time.monotonic()

                def found() -> dict[str, list[dict[str, Any]]]:
                    return {s: json.loads(f or "[]") for s, f in rows(
                        collector.store, "SELECT stream, config_findings::VARCHAR FROM verdicts_current")}

                await eventually(lambda: all(expect[k] in {f["kind"] for f in found().get(streams[k], [])}
                                             for k in expect) and len(found()) == len(keys), timeout=60,
                                 interval=0.25, message=f"each pull-settings finding raised: {expect}")
                def gauged() -> dict[str, set[str]] | None:  # /metrics, by kind
                    out: dict[str, set[str]] = {}
                    for x in scrape(collector.metrics_bound).get("jetwatch_consumer_config_finding", []):
                        out.setdefault(x.labels["stream"], set()).add(x.labels["kind"])
                    return out if all(expect[k] in out.get(streams[k], set()) for k in expect) else None

                on_metrics = await eventually(gauged, timeout=30, message="each finding on /metrics")
                assert not {streams[k] for k in keys if k not in expect} & set(on_metrics), on_metrics
                # What the findings say the server does, the server does:
                await eventually(lambda: workers["standby-ok"].stats.received > 0, message="the sane standby served")
                # the pinned worker, unpinned after 2 s while its pull waited, is refused (423) at the next message
                await asyncio.sleep(max(0.0, pinned_at + 3.0 - time.monotonic()))  # past the 2 s timeout
                await publish(admin, f"{streams['PIN']}.x", 1)
                await eventually(lambda: "423" in workers["pin-long"].stats.statuses, timeout=15,
                                 message="the long pull refused with 423 once the pin timed out")
                assert workers["standby-dead"].stats.received == 0  # 3 in flight, never 5
                assert "400" in workers["plain-min"].stats.statuses
                assert workers["plain-ok"].stats.received > 0
                stored = rows(collector.store, "SELECT name, expires_ns, min_ack_pending, client_id, verification, "
                                               "received_at >= first_seen_at FROM pull_settings WHERE stream = ?",
                              [streams["OVF"]])
                assert {r[0]: (r[2], r[4], r[5]) for r in stored}["standby-dead"] == (5, "verified", True)
                assert all(r[3] is not None for r in stored)  # the client seen
                return found()
        finally:
            for w in workers.values():
                await w.stop()
            for nc in conns:
                await nc.close()

    got = run(scenario())
    for key, stream in streams.items():
        assert {f["kind"] for f in got[stream]} == ({expect[key]} if key in expect else set()), (key, got[stream])
    [pin] = got[streams["PIN"]]
    assert pin["numbers"] == {"priority_timeout_seconds": 2, "expires_seconds": 5, "workers": 1}
    assert pin["reason"].startswith("connection pin-long (verified) announced pulling with expires 5 s; "
                                    "priority_timeout is 2 s")
    assert pin["announced_by"] == [{"name": "pin-long", "verification": "verified"}]
    [ovf] = got[streams["OVF"]]
    assert "standby-dead" in ovf["reason"] and (ovf["numbers"]["min_ack_pending"], ovf["numbers"]["max_ack_pending"]) \
        == (5, 5) and ovf["numbers"]["server_version"]

    out = subprocess.run([sys.executable, "-m", "jetwatch", "status", "--db", db_path, "--json"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode in (0, 1, 2), out.stderr
    said = {c["stream"]: c for c in json.loads(out.stdout)}
    for key, stream in streams.items():
        assert {f["kind"] for f in said[stream]["config_findings"]} == ({expect[key]} if key in expect else set())

    for k in [k for k in os.environ if k.startswith("JETWATCH_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("JETWATCH_DB", db_path)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["stream"], at.query_params["consumer"] = streams["PIN"], "c"
    at.run()
    at.switch_page("views/consumer.py").run()
    assert not at.exception, [e.message for e in at.exception]
    text = "\n".join(m.value for m in at.markdown).replace("\\", "")
    assert "Configuration findings" in text and "pull expiry outlasts priority_timeout" in text, text[-2000:]
    assert "**Fix:** pull with an expiry well under priority_timeout" in text



def test_the_capture_checks_a_connection_once_and_judging_reads_only_recent_uncontradicted_settings(run) -> None:
    """A verified connection is not asked about again; a forgery CONNZ contradicts is stored but
    never read for findings; settings not said again within CURRENT_FOR are forgotten."""
    import datetime as dt

    from jetwatch.collectors.pull_settings import CURRENT_FOR, PullSettingsCapture

    asked: list[int] = []

    class Connz:
        async def connection(self, server_id: str, cid: int, closed_too: bool = False) -> dict[str, Any]:
            asked.append(cid)
            return {"name": "w1" if cid == 7 else "someone-else"}

    class Conn:
        options = {"name": "w1"}

        def __init__(self, cid: int) -> None:
            self._server_info = {"client_id": cid, "server_id": "SRV"}

    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    now = [t0]
    stored: list[dict[str, Any]] = []

    async def scenario() -> PullSettingsCapture:
        async def write(fn: Any) -> None:
            class Con:
                def execute(self, text: str, row: dict[str, Any]) -> None:
                    stored.append(row)
            fn(Con())

        capture = PullSettingsCapture(None, Connz(), "$G", write, clock=lambda: now[0])  # type: ignore[arg-type]
        request = {"batch": 1, "expires": 300 * S, "group": "jobs"}
        for cid in (7, 7, 8):
            ann = PullAnnouncer(Conn(cid), "S", "C").announcement(PullSettings.of_request(request))
            await capture.handle(announce_subject("S", "C"), ann.encode())
        return capture

    capture = run(scenario())
    assert asked == [7, 8]  # connection 7 checked once
    assert [r["verification"] for r in stored] == ["verified", "verified", "unverified"]
    [(key, current)] = capture.current(t0).items()
    assert key == ("$G", "S", "C") and [r["client_id"] for r in current] == [7]
    assert capture.current(t0 + CURRENT_FOR + dt.timedelta(seconds=1)) == {}


def test_pull_settings_are_stored_once_per_connection_and_pruned_with_the_events(db_path) -> None:
    import datetime as dt

    from jetwatch.collectors.pull_settings import recent_settings, settings_row, store_settings
    from jetwatch.store.database import Store
    from jetwatch.store.retention import Cutoffs, prune

    class Conn:
        options = {"name": "w1"}
        _server_info = {"client_id": 7, "server_id": "SRV"}

    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    store = Store(db_path)
    for i, expires in enumerate((5 * S, 300 * S)):  # the same connection, its settings changed
        ann = PullAnnouncer(Conn(), "S", "C").announcement(PullSettings.of_request({"expires": expires}))
        row = settings_row(ann, "verified", "ok", "$G", t0 + dt.timedelta(seconds=60 * i))
        store.write(lambda con, row=row: store_settings(con, row))
    [kept] = store.read(lambda con: recent_settings(con, t0))
    assert (kept["expires_ns"], kept["first_seen_at"], kept["received_at"]) == (
        300 * S, t0, t0 + dt.timedelta(seconds=60))
    store.write(lambda con: prune(con, Cutoffs.at(t0 + dt.timedelta(days=30), 86400.0, 86400.0)))
    assert store.read(lambda con: recent_settings(con, t0)) == []


def test_announced_settings_are_claims_of_a_named_connection_and_a_group_the_consumer_lacks_is_ignored(
        nats_server, db_path, uid, run) -> None:
    """`mallory`, a real connection that pulls from neither consumer, announces on A/wa's subject
    that she pulls in its group with no expiry: the finding is raised as her claim, its words naming
    her connection and that CONNZ verified it (only that it exists under that name). On A/wb she
    announces a group A/wb does not have, with no expiry and min_pending: ignored, no finding."""
    stream = f"{uid}_CLAIM"
    settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.5,
                                  monitor_url=(nats_server.monitor_url,))

    async def scenario() -> dict[str, list[dict[str, Any]]]:
        admin = await nats.connect(nats_server.url, name="admin")
        mallory = await nats.connect(nats_server.url, name="mallory")
        try:
            api = JetStreamAPI(admin)
            await make_stream(api, stream, [f"{stream}.x"])
            for consumer in ("wa", "wb"):
                await make_consumer(api, stream, consumer, "pinned_client", timeout_s=30)
            async with collecting(settings) as collector:
                for consumer, group in (("wa", "jobs"), ("wb", "other")):
                    said = PullAnnouncer(mallory, stream, consumer, policy="pinned_client")
                    await said.pulling({"group": group, "expires": 0, **({"min_pending": 5} if group == "other" else {})})
                await mallory.flush()

                def found() -> dict[str, list[dict[str, Any]]]:
                    return {c: json.loads(f or "[]") for c, f in rows(
                        collector.store, "SELECT consumer, config_findings::VARCHAR FROM verdicts_current "
                                         "WHERE stream = ?", [stream])}

                await eventually(lambda: len(rows(collector.store, "SELECT * FROM pull_settings WHERE stream = ?",
                                                  [stream])) == 2, message="both announcements stored")
                judged = collector.cycles
                await eventually(lambda: collector.cycles >= judged + 2, message="two cycles judged with both")
                return found()
        finally:
            await mallory.close()
            await admin.close()

    got = run(scenario())
    [claim] = got["wa"]
    assert claim["kind"] == "pull_expires_past_pin_timeout"
    assert claim["reason"].startswith("connection mallory (verified) announced pulling with no expiry"), claim["reason"]
    assert claim["announced_by"] == [{"name": "mallory", "verification": "verified"}]
    assert got["wb"] == [], got["wb"]
