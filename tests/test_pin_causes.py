"""Why each pin moved, and whether a standby waits: real workers on a real server, a real collector.

One consumer's pin is moved every way a single server can move it: an unpin from another client (named
by the server's API audit advisory), an operator unpin from the dashboard (named by jetwatch's audit
log), a holder that stops pulling while connected (priority_timeout), and a holder that disconnects.
Each move's cause is read back where people read it: `status --json`, /metrics and the Pins page.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import urllib.request

import nats
import pandas as pd
import pytest
import streamlit as st

from jetwatch.core.embedded_server import free_port
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.core.pin_announce import PinAnnouncer
from jetwatch.core.settings import Settings
from jetwatch.demo.workers import PullWorker
from jetwatch.health import advice, pin_causes
from jetwatch.store.database import Store
from tests.helpers import (
    LoopThread,
    clean_env,
    make_consumer,
    make_stream,
    operators_file,
    pages_on,
    publish,
    rows,
    status_json,
    wait_until,
)

# The pin's timer (priority_timeout) is short only while the test makes a holder miss it: the
# workers pull in the test's own process, beside the pages it runs, and a loaded machine can hold
# their pulls back past a 2 s timer, which moved the pin once more than the test meant.
PIN_MISSED_S, PIN_KEPT_S = 2, 120

PINS = "SELECT event, reason FROM pin_events WHERE stream = ? ORDER BY ts, CASE event WHEN 'unpinned' THEN 0 ELSE 1 END"


def _moves(store: Store, stream: str) -> list[dict]:
    import datetime as dt
    now = dt.datetime.now(dt.UTC)
    frame = store.read(lambda con: pin_causes.moves(con, now - dt.timedelta(hours=1), now + dt.timedelta(minutes=1),
                                                    Settings({"deploy_window": 1.0}), stream=stream, consumer="work"))
    return frame.to_dict("records")


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        return reply.read().decode()


class Worker:
    """A pull worker on a connection of its own (named, so its announcement verifies), announcing its pin."""

    def __init__(self, loop: LoopThread, url: str, stream: str, name: str, version: str):
        self.loop, self.name = loop, name

        async def start():
            nc = await nats.connect(url, name=name)
            announcer = PinAnnouncer(nc, stream, "work", group="jobs", version=version)
            return nc, PullWorker(nc, stream, "work", "jobs", name=name, announcer=announcer).start()

        self.nc, self.pull = loop.call(start())

    def stop(self, close: bool = True) -> None:
        async def stop():
            await self.pull.stop()
            if close:
                await self.nc.close()
        self.loop.call(stop())


@pytest.fixture
def site(nats_server, db_path, uid, monkeypatch):
    stream = f"{uid}_WHY"
    loop = LoopThread()

    async def setup():
        nc = await nats.connect(nats_server.url, name="test-publisher")
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid.lower()}.why"])
        await make_consumer(api, stream, "work", "pinned_client", timeout_s=PIN_KEPT_S)
        return nc

    nc = loop.call(setup())
    port = free_port()
    collector = subprocess.Popen(
        [sys.executable, "-m", "jetwatch.cli", "collect", "--server", nats_server.url, "--db", db_path,
         "--interval", "0.3s", "--inference-grace", "1.5s", "--include-streams", stream, "--deploy-window", "1s",
         "--monitor-url", nats_server.monitor_url, "--metrics-address", f"127.0.0.1:{port}",
         "--metrics-cardinality", "all", "--flapping-switches", "3", "--health-min-span", "5s"], env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pages_on(monkeypatch, db_path, nats_server.url)
    st.cache_data.clear()
    store = Store(db_path)
    wait_until(lambda: store.exists() and rows(store, "SELECT count(*) FROM verdicts_current")[0][0], timeout=60,
               message="the collector's first cycle judged")
    yield {"stream": stream, "loop": loop, "nc": nc, "url": nats_server.url, "store": store, "port": port,
           "subject": f"{uid.lower()}.why", "operators": operators_file(os.path.dirname(db_path), "ana"), "db": db_path}
    collector.send_signal(signal.SIGTERM)
    collector.wait(30)
    loop.close()


def _pin_timer(site: dict, seconds: float, holder: Worker | None = None) -> None:
    """Set the consumer's priority_timeout (the one setting of a priority group the server lets
    change) and wait until the collector has sampled it (a move's cause reads the timer in force)
    and, given the holder, until it has pulled again: the server restarts the pin's timer, with
    the timeout then in force, only on the holder's next pull."""
    async def update():
        await make_consumer(JetStreamAPI(site["nc"]), site["stream"], "work", "pinned_client", timeout_s=seconds)
    pulls = holder.pull.stats.pulls if holder else 0
    site["loop"].call(update())
    if holder:
        wait_until(lambda: holder.pull.stats.pulls > pulls, timeout=30, message="the holder's next pull")
    wait_until(lambda: rows(site["store"], "SELECT priority_timeout_ns FROM consumer_configs WHERE stream = ? "
                                           "ORDER BY ts DESC LIMIT 1", [site["stream"]]) == [(int(seconds * 1e9),)],
               timeout=30, message=f"the {seconds} s pin timer sampled")


def _holder(workers: list[Worker], store: Store, stream: str) -> Worker:
    """The worker the server pinned now: as sampled, as the newest pinned advisory says, and as
    the worker itself knows. The samples and the advisories are stored by different loops of the
    collector: a sample taken before the newest move still shows the old pin, which the old holder,
    stalled, still believes it has."""
    def found():
        sampled = rows(store, "SELECT pinned_id FROM consumer_latest WHERE stream = ?", [stream])
        newest = rows(store, "SELECT pinned_id FROM pin_events WHERE stream = ? AND event = 'pinned' "
                             "ORDER BY ts DESC LIMIT 1", [stream])
        pin = sampled[0][0] if sampled else None
        if not pin or newest != [(pin,)]:
            return None
        return next((w for w in workers if w.pull.pin_id == pin), None)
    return wait_until(found, timeout=30, message="the pin sampled and its holder known")


def test_each_pin_move_has_its_cause_in_status_metrics_and_the_store(site, monkeypatch):
    from tests.test_dashboard import frame, run_app
    from tests.test_dashboard_actions import consumer_page, login

    stream, store, loop = site["stream"], site["store"], site["loop"]
    more = lambda: loop.call(publish(site["nc"], site["subject"], 2))  # noqa: E731
    a = Worker(loop, site["url"], stream, "worker-a", "1.0")
    more()
    wait_until(lambda: rows(store, "SELECT count(*) FROM pin_holders WHERE verification = 'verified'")[0][0] == 1,
               timeout=30, message="worker-a pinned, announced and verified")
    b = Worker(loop, site["url"], stream, "worker-b", "1.0")
    workers = [a, b]

    def moved(n: int) -> None:
        wait_until(lambda: len(rows(store, PINS, [stream])) >= 2 * n + 1, timeout=30, message=f"move {n} stored")
        _holder(workers, store, stream)

    def status() -> dict:
        return next(r for r in status_json(site["db"]) if r["stream"] == stream)

    # Both workers pull: a standby waits behind the holder.
    wait_until(lambda: status()["failover"]["readiness"] == "standby", timeout=30, message="a standby seen")

    # 1. Another client unpins, with the server's API (not jetwatch).
    async def unpin_elsewhere():
        nc = await nats.connect(site["url"], name="ops-script")
        reply = await nc.request(f"$JS.API.CONSUMER.UNPIN.{stream}.work", b'{"group":"jobs"}', timeout=5)
        await nc.close()
        return json.loads(reply.data)
    assert "error" not in loop.call(unpin_elsewhere())
    more()
    moved(1)

    # 2. An operator unpins from the dashboard: the dialog and the Audit page name the holder.
    held = _holder(workers, store, stream)
    wait_until(lambda: rows(store, "SELECT verification FROM pin_holders WHERE pin_id = ?", [held.pull.pin_id])
               == [("verified",)], timeout=30, message="the holder's announcement verified")
    wait_until(lambda: status()["failover"]["readiness"] == "standby", timeout=30, message="the standby seen again")
    monkeypatch.setenv("JETWATCH_OPERATORS_FILE", site["operators"])
    at = login(consumer_page({"stream": stream, "consumer": "work"}))

    def standby_shown() -> bool:
        """The tile says what the latest sample shows (not the one the status read above saw), and a
        sample can fall between the standby's pull expiring and its next (health/failover.py): the
        page is run again until a sample shows the standby (two workers: one holds, one waits)."""
        [tile] = [m for m in at.metric if m.label == "Standby"]
        if tile.value != "1 waiting":
            at.run()
        return tile.value == "1 waiting"

    wait_until(standby_shown, timeout=30, message="the Standby tile showing the waiting worker")
    at.button(key="action_unpin").click().run()
    question = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert f"drops pin {held.pull.pin_id}, held by {held.name} · verified" in question, question
    at.button(key="action_confirm").click().run()
    assert not at.exception
    more()
    moved(2)
    audit = frame(run_app("views/audit.py"), "Summary")
    assert list(audit["Pin holder"]) == [f"{held.name} · verified"], audit
    assert audit["Summary"].iloc[0] == f"ana unpinned {stream} / work (pin held by {held.name} · verified): ok"

    # 3. The holder stops pulling and stays connected: priority_timeout moves the pin.
    holder = _holder(workers, store, stream)
    _pin_timer(site, PIN_MISSED_S, holder)
    holder.pull.stalled = True
    unpinned = lambda n: wait_until(lambda: len(rows(store, PINS, [stream])) >= 2 * n, timeout=30,  # noqa: E731
                                    message=f"unpin {n} stored")
    unpinned(3)  # then work: the standby takes it and the pin
    _pin_timer(site, PIN_KEPT_S)
    more()
    moved(3)
    holder.pull.stalled = False

    # 4. The holder disconnects: its pin times out too, but CONNZ shows its connection closed.
    holder = _holder(workers, store, stream)
    _pin_timer(site, PIN_MISSED_S, holder)
    holder.stop()
    unpinned(4)
    _pin_timer(site, PIN_KEPT_S)
    more()
    moved(4)
    workers.remove(holder)

    wait_until(lambda: len(_moves(store, stream)) == 4 and all(m["exit_state"] for m in _moves(store, stream)[2:]),
               timeout=30, message="four moves with their facts")
    got = _moves(store, stream)
    assert [m["cause"] for m in got] == ["operator_unpin", "operator_unpin", "priority_timeout", "holder_disconnected"]
    assert got[0]["requester_name"] == "ops-script" and got[0]["operator"] is None
    assert "client ops-script" in pin_causes.why(got[0])
    assert got[1]["operator"] == "ana" and "operator ana" in pin_causes.why(got[1])
    assert got[2]["exit_state"] == "open" and got[2]["priority_timeout_seconds"] == PIN_MISSED_S
    assert "stopped pulling at" in pin_causes.why(got[2]) and "still connected" in pin_causes.why(got[2])
    assert got[3]["exit_state"] == "closed" and got[3]["stop_reason"] == "Client Closed"
    assert got[3]["from_holder"] == holder.name and f"the holder {holder.name} disconnected" in pin_causes.why(got[3])

    # Only the unpin requests are kept of the API audit advisories (the collector's own listing is not).
    assert rows(store, "SELECT client_name, error FROM unpin_requests WHERE stream = ? ORDER BY ts", [stream])[0] == \
        ("ops-script", None)
    assert {r[0] for r in rows(store, "SELECT stream FROM unpin_requests")} == {stream}
    assert rows(store, "SELECT count(*) FROM unpin_requests")[0][0] == 2  # ops-script's and the dashboard's

    # status --json: the causes in the health window, the newest moves in words, and no standby left.
    mine = wait_until(lambda: (s := status())["failover"]["readiness"] == "no_standby" and s, timeout=30,
                      message="no standby once one worker is gone")
    assert mine["failover"]["finding"] == "No standby: if the holder stops, work stops until a new client pulls"
    assert mine["pin_moves"]["by_cause"] == {"operator_unpin": 2, "holder_disconnected": 1, "priority_timeout": 1}
    assert mine["pin_moves"]["dominant"] == "operator_unpin"
    assert [m["cause"] for m in mine["pin_moves"]["latest"]] == ["holder_disconnected", "priority_timeout",
                                                                 "operator_unpin", "operator_unpin"]
    assert mine["pin_moves"]["latest"][3]["requested_by"].startswith("client ops-script")
    # Five pins in the window, more than --flapping-switches 3: FLAPPING, said with its dominant cause.
    mine = wait_until(lambda: (s := status())["verdict"] == "FLAPPING" and s, timeout=30,
                      message="the consumer judged FLAPPING")
    # The pins that began (the rule's count) and the pins that ended (the causes' count), each named
    # for what it counts: five new pins, four of them ended, the fifth held now.
    assert "5 new pins in the last" in mine["reason"] and "; 4 pins ended: mostly operator unpin (2 operator unpin, " \
        "1 holder disconnected, 1 priority_timeout)" in mine["reason"], mine["reason"]
    assert mine["next_step"].endswith(advice.FLAPPING_STEP["operator_unpin"]), mine["next_step"]
    # The command as users run it says the same.
    out = subprocess.run([sys.executable, "-m", "jetwatch.cli", "status", "--json", "--db", site["db"]],
                         env=clean_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    said = next(r for r in json.loads(out.stdout) if r["stream"] == stream)
    assert (said["verdict"], said["pin_moves"]["by_cause"]) == (mine["verdict"], mine["pin_moves"]["by_cause"])

    # /metrics: each move counted once by cause, once its cause is settled; readiness as a label.
    def counted() -> str | None:
        text = _metrics(site["port"])
        want = [f'jetwatch_consumer_pin_moves_total{{account="$G",cause="{c}",cluster="default",consumer="work",'
                f'group="jobs",stream="{stream}"}} {n}' for c, n in
                (("operator_unpin", "2.0"), ("priority_timeout", "1.0"), ("holder_disconnected", "1.0"))]
        return text if all(w in text for w in want) else None
    try:
        text = wait_until(counted, timeout=30, message="the moves counted in /metrics")
    except AssertionError as exc:  # say what was counted against what the store now says
        counts = [ln for ln in _metrics(site["port"]).splitlines() if ln.startswith("jetwatch_consumer_pin_moves_total{")]
        raise AssertionError(f"{exc}: /metrics {counts}; the store now: "
                             f"{[(m['cause'], m['exit_state']) for m in _moves(store, stream)]}") from None
    assert f'jetwatch_consumer_failover{{account="$G",cluster="default",consumer="work",group="jobs",' \
           f'readiness="no_standby",stream="{stream}"}} 1.0' in text
    assert 'jetwatch_pinned_groups{readiness="no_standby"} 1.0' in text
    # The Pins page: why each switch moved, and the consumer's causes over the range.
    at = run_app("views/pins.py")
    why = frame(at, "Why it moved")
    mine = why[why["Stream"] == stream]
    assert list(mine["Cause"]) == ["holder disconnected", "priority_timeout", "operator unpin", "operator unpin"]
    assert mine.iloc[3]["Why it moved"].startswith("unpinned by client ops-script")
    assert mine.iloc[2]["Why it moved"] == "unpinned by operator ana (jetwatch audit log)"
    assert mine.iloc[0]["From"] == f"{holder.name} · verified"  # in the Consumer page's words
    per = frame(at, "Causes over the range")
    assert per[per["Stream"] == stream].iloc[0][["Moves", "Mostly", "Causes over the range"]].tolist() == \
        [4, "operator unpin", "2 operator unpin, 1 holder disconnected, 1 priority_timeout"]
    # The Fleet: FLAPPING's reason and next step name the dominant cause.
    fleet = frame(run_app(), "Verdict")
    assert fleet.iloc[0]["Verdict"] == "FLAPPING"
    assert "4 pins ended: mostly operator unpin (2 operator unpin" in fleet.iloc[0]["Why"], fleet.iloc[0]["Why"]
    assert fleet.iloc[0]["Next step"].endswith(advice.FLAPPING_STEP["operator_unpin"])
    at = consumer_page({"stream": stream, "consumer": "work"})
    [tile] = [m for m in at.metric if m.label == "Standby"]
    assert tile.value == "none" and "No standby: if the holder stops, work stops until a new client pulls" in \
        [c.value for c in at.caption]
    for w in workers:
        w.stop()


def test_a_deploy_is_told_from_one_workers_restart(nats_server, db_path, uid, run):
    """Three consumers, one worker each. Restarting every worker with a new version is a deploy (the
    version changed); restarting them all again with the same version is one too (three groups
    re-pinned within --deploy-window); restarting one worker alone, later, is not: its holder
    disconnected."""
    import asyncio
    import datetime as dt

    from tests.helpers import collecting, collector_settings, eventually

    stream, window = f"{uid}_DEPLOY", 8.0
    names = ("c1", "c2", "c3")
    store = Store(db_path)
    settings = collector_settings(nats_server.url, db_path, (stream,), monitor_url=(nats_server.monitor_url,),
                                  deploy_window=window, interval=0.3)

    async def worker(consumer: str, version: str, generation: int) -> tuple:
        nc = await nats.connect(nats_server.url, name=f"{consumer}-worker-{generation}")
        announcer = PinAnnouncer(nc, stream, consumer, group="jobs", version=version)
        return nc, PullWorker(nc, stream, consumer, "jobs", name=f"{consumer}-{generation}", announcer=announcer).start()

    async def restart(old: tuple, consumer: str, version: str, generation: int) -> tuple:
        await old[1].stop()
        await old[0].close()
        return await worker(consumer, version, generation)

    def moves() -> list[dict]:
        now = dt.datetime.now(dt.UTC)
        return store.read(lambda con: pin_causes.moves(con, now - dt.timedelta(hours=1), now, settings)).to_dict("records")

    async def scenario() -> list[dict]:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid.lower()}.deploy.>"])
        for c in names:
            await make_consumer(api, stream, c, "pinned_client", timeout_s=2)
        async with collecting(settings):
            workers = {c: await worker(c, "1.0", 0) for c in names}

            async def work_and_wait(count: int) -> None:
                for c in names:
                    await publish(nc, f"{uid.lower()}.deploy.{c}", 1)
                await eventually(lambda: rows(store, "SELECT count(*) FROM pin_events WHERE stream = ? AND event = 'pinned'"
                                              " AND source = 'advisory'", [stream])[0][0] >= count, timeout=30,
                                 message=f"{count} pins")

            await work_and_wait(3)
            # A deploy: every worker restarted with a new version.
            workers = {c: await restart(workers[c], c, "1.1", 1) for c in names}
            await work_and_wait(6)
            # Again with the same version: three groups re-pinned within the window.
            workers = {c: await restart(workers[c], c, "1.1", 2) for c in names}
            await work_and_wait(9)
            last = max(m["ts"] for m in await asyncio.to_thread(moves))
            await eventually(lambda: dt.datetime.now(dt.UTC) > last + dt.timedelta(seconds=window + 1),
                             timeout=30, message="the deploy window passed")
            # One worker restarted alone, same version: not a deploy.
            workers["c1"] = await restart(workers["c1"], "c1", "1.1", 3)
            await work_and_wait(10)
            def settled() -> bool:
                done = moves()
                return len(done) == 7 and max(done, key=lambda m: m["ts"])["exit_state"] is not None
            try:
                await eventually(settled, timeout=30, interval=1, message="seven moves with the last holder's exit checked")
            except AssertionError:
                for m in moves():
                    print("MOVE", m["consumer"], m["ts"], m["cause"], m["exit_state"], m["reason"], m["source"], m["from_pin"], m["to_pin"])
                for r in rows(store, "SELECT consumer, ts, event, pinned_id, reason, source FROM pin_events WHERE stream = ? ORDER BY consumer, ts", [stream]):
                    print("EV", r)
                for r in rows(store, "SELECT * FROM pin_holder_exits"):
                    print("EXIT", r)
                raise
            got = await asyncio.to_thread(moves)
            for w in workers.values():
                await w[1].stop()
                await w[0].close()
        await nc.close()
        return got

    got = run(scenario())
    by_consumer = {c: [m for m in got if m["consumer"] == c] for c in names}
    for c in names:
        first, second = by_consumer[c][0], by_consumer[c][1]
        assert first["cause"] == "deploy" and (first["from_version"], first["to_version"]) == ("1.0", "1.1"), first
        assert "version 1.0, the next holder 1.1" in pin_causes.why(first)
        assert second["cause"] == "deploy" and second["from_version"] == second["to_version"] == "1.1", second
        assert second["burst_groups"] >= 3 and "pins of 3 consumers moved" in pin_causes.why(second)
    alone = by_consumer["c1"][2]
    assert alone["cause"] == "holder_disconnected", alone
    assert alone["burst_groups"] == 1 and alone["exit_state"] == "closed"
    assert "disconnected at" in pin_causes.why(alone)


# FLAPPING's next step, judged like a detector's words: each dominant cause gets its own step, and
# look-alikes (a tie, a cause among others, no causes at all) get the step that fits them.
FLAPPING_CASES = [
    ({"priority_timeout": 5, "operator_unpin": 1}, "priority_timeout",
     "6 pins ended: mostly priority_timeout (5 priority_timeout, 1 operator unpin)"),
    ({"operator_unpin": 4}, "operator_unpin", "4 pins ended: mostly operator unpin (4 operator unpin)"),
    ({"leader_change": 3, "unknown": 1}, "leader_change", "4 pins ended: mostly leader change (3 leader change"),
    ({"deploy": 6}, "deploy", "6 pins ended: mostly deploy (6 deploy)"),
    ({"holder_disconnected": 3, "priority_timeout": 2}, "holder_disconnected",
     "5 pins ended: mostly holder disconnected (3 holder disconnected"),
    # A tie is said as one; its step is the cause the query tries first (the more specific fact).
    ({"deploy": 2, "priority_timeout": 2}, "deploy", "4 pins ended: no single cause (2 deploy, 2 priority_timeout)"),
    ({"unknown": 5}, "unknown", "5 pins ended: mostly unknown (5 unknown)"),
]


@pytest.mark.parametrize("moves,cause,said", FLAPPING_CASES)
def test_flapping_names_its_dominant_cause_and_the_step_that_fits(moves, cause, said):
    context = advice.Context(priority_policy="pinned_client", pinned_id="PIN", moves=moves,
                             unpins={"timeout": 9})  # the server's reasons alone would say timeouts
    step = advice.next_step("FLAPPING", {"switches": 6, "limit": 4}, context)
    assert step.startswith(said) and step.endswith(advice.FLAPPING_STEP[cause]), step
    reason = advice.reason_since("FLAPPING", "6 pin switches in 5 minutes", {}, context, dt.datetime.now(dt.UTC))
    assert reason.startswith("6 pin switches in 5 minutes; " + said), reason
    # Every other verdict keeps its words: the causes are FLAPPING's.
    assert advice.reason_since("LAGGING", "backlog grew", {}, context, dt.datetime.now(dt.UTC)) == "backlog grew"


def test_flapping_without_stored_causes_keeps_the_servers_reasons():
    context = advice.Context(priority_policy="pinned_client", unpins={"timeout": 3, "admin": 1})
    assert advice.next_step("FLAPPING", {}, context).startswith("3 timeouts and 1 admin unpin: the pinned client stops")
    assert advice.reason_since("FLAPPING", "5 pin switches", {}, context, dt.datetime.now(dt.UTC)) == "5 pin switches"


# The API audit advisory of an unpin as nats-server 2.15.1 sent it (captured from a real server).
AUDITED_UNPIN = (b'{"type":"io.nats.jetstream.advisory.v1.api_audit","id":"OJGp9d5zDtFhx5oW6X01ba","timestamp":'
                 b'"2026-11-27T16:20:44.092791867Z","server":"NCQGH4CBNDCA32AWYANGSD4P3TVV24MLYW2OSV6BD53HVSX55B633CFU",'
                 b'"client":{"start":"2026-11-27T16:20:44.085890964Z","host":"127.0.0.1","id":5,"acc":"$G","name":'
                 b'"probe-op","lang":"python3","ver":"2.16.0","rtt":1166978,"server":"NCQGH4CBNDCA32AWYANGSD4P3TVV24M'
                 b'LYW2OSV6BD53HVSX55B633CFU","kind":"Client","client_type":"nats"},"subject":"$JS.API.CONSUMER.UNPIN.'
                 b'S.c","request":"{\\"group\\": \\"jobs\\"}","response":"{\\"type\\":\\"io.nats.jetstream.api.v1.'
                 b'consumer_unpin_response\\"}"}')


def test_only_unpin_requests_are_kept_of_the_api_audit_advisories():
    from jetwatch.collectors.unpin_requests import NotAnUnpinRequest, parse_unpin_request

    now = dt.datetime.now(dt.UTC)
    row = parse_unpin_request(AUDITED_UNPIN, now, "$G")
    assert row is not None
    assert {k: row[k] for k in ("stream", "consumer", "group_name", "client_name", "client_id", "client_host",
                                "client_account", "error")} == {
        "stream": "S", "consumer": "c", "group_name": "jobs", "client_name": "probe-op", "client_id": 5,
        "client_host": "127.0.0.1", "client_account": "$G", "error": None}
    info = AUDITED_UNPIN.replace(b"$JS.API.CONSUMER.UNPIN.S.c", b"$JS.API.CONSUMER.INFO.S.c")
    assert parse_unpin_request(info, now, "$G") is None  # every other API call: dropped unparsed
    refused = AUDITED_UNPIN.replace(b'consumer_unpin_response\\"}', b'consumer_unpin_response\\",\\"error\\":'
                                    b'{\\"code\\":400,\\"err_code\\":10160,\\"description\\":\\"consumer does not have'
                                    b' priority group\\"}}')
    assert parse_unpin_request(refused, now, "$G")["error"] == "10160 consumer does not have priority group"
    with pytest.raises(NotAnUnpinRequest, match="one stream and one consumer"):
        parse_unpin_request(AUDITED_UNPIN.replace(b"UNPIN.S.c", b"UNPIN.S.c.d"), now, "$G")
    with pytest.raises(NotAnUnpinRequest, match="not an API audit advisory"):
        parse_unpin_request(AUDITED_UNPIN.replace(b"api_audit", b"other"), now, "$G")


@pytest.mark.parametrize("state,expected", [
    # (policy, pin, waiting, pending, in flight, max_ack_pending): readiness
    (("pinned_client", "PIN", 1, 5, 0, 1000), "standby"),      # work pending: a waiting pull is not the holder's
    (("pinned_client", "PIN", 1, 0, 0, 1000), "no_standby"),   # nothing pending: the holder's own pull waits
    (("pinned_client", "PIN", 2, 0, 0, 1000), "standby"),      # one beyond the holder's
    (("pinned_client", "PIN", 1, 5, 1000, 1000), "no_standby"),  # at max_ack_pending the holder's pull waits too
    (("pinned_client", "PIN", 0, 5, 0, 1000), "no_standby"),
    (("pinned_client", None, 3, 5, 0, 1000), "no_holder"),
    (("overflow", "PIN", 0, 5, 0, 1000), None),                # not a pinned group: no finding
])
def test_failover_readiness_tells_the_holders_pulls_from_a_standbys(state, expected):
    from jetwatch.health import failover

    assert failover.readiness(*state, holder_pulls=1) == expected
    if expected == "no_standby":
        assert failover.finding(*state, holder_pulls=1)["finding"] == \
            "No standby: if the holder stops, work stops until a new client pulls"
    assert failover.readiness("pinned_client", "PIN", 2, 0, 0, 1000, holder_pulls=2) == "no_standby"  # pull-ahead clients


NOW = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize("reason,exit_state,seconds_ago,counted", [
    ("timeout", None, 5, False),  # CONNZ not answered yet: it may still say the holder disconnected
    ("timeout", "closed", 5, True),
    ("timeout", "open", 5, True),
    ("timeout", None, 60, True),  # never answered within the bound: settled as it stands
    ("admin", None, 5, True),  # an operator's unpin: no CONNZ question
], ids=["timed out, CONNZ not answered yet", "holder disconnected", "holder still connected",
        "no answer past the bound", "an operator's unpin"])
def test_a_timed_out_pin_is_counted_once_connz_was_asked_about_its_holder(reason, exit_state, seconds_ago, counted):
    """/metrics counts each move once, by its cause: a timeout counted before CONNZ answered
    would stay `priority_timeout` for good when the holder had in fact disconnected."""
    moves = pd.DataFrame([{"ts": NOW - dt.timedelta(seconds=seconds_ago), "reason": reason, "exit_state": exit_state}])
    assert len(pin_causes.settled(moves, NOW - dt.timedelta(seconds=30))) == int(counted)
