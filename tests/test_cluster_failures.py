"""When the cluster under the consumers fails: a real three-node cluster, servers SIGKILLed,
stopped (SIGTERM) or hung (SIGSTOP), the collector on its default settings (a subprocess, as deployed), in both sampling modes.

Each consumer the cluster can no longer serve is named for it (NO_LEADER, API_UNAVAILABLE) within
30 s of the kill, stays named at every cycle after, and stays listed everywhere with its last known
state; `check` is CRITICAL naming the cause, not "collector stopped?". Before, these consumers
were OK on frozen samples, or vanished from the Fleet. Once the servers are back, each leaves its
cluster verdict, and a collector started mid-outage captures durably again."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import io
import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import nats
import pytest
import streamlit as st

from jetwatch import cli
from jetwatch.core.embedded_server import NatsServer, ServerStartError, cluster, free_port, nats_server_binary
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.demo.workers import PullWorker
from tests.helpers import LoopThread, clean_env, make_consumer, pages_on, publish, said_named, status_json, wait_until
from tests.incident_library import cluster_ready
from tests.test_dashboard import run_app

# Serial: wall-clock deadlines from a kill. Each test starts a cluster of its own and needs no
# other: `make test` may run them beside each other and beside the other serial tests.
pytestmark = [pytest.mark.cluster, pytest.mark.serial]

T = TypeVar("T")
NAMED_WITHIN = 30.0  # seconds from the kill
CLUSTER_RED = {"NO_LEADER", "API_UNAVAILABLE"}


def _started(servers: list[NatsServer]) -> list[NatsServer]:
    for node in servers:
        for attempt in range(3):  # a free port can be taken by another test before the server binds it
            node.monitor_port = free_port()
            try:
                node.start()
                break
            except ServerStartError:
                if attempt == 2 or "address already in use" not in (node.log_path or Path()).read_text():
                    raise
    return servers


@pytest.fixture
def nodes(tmp_path) -> Iterator[list[NatsServer]]:
    servers = _started(cluster(tmp_path / "cluster"))
    yield servers
    for node in servers:
        node.stop(signal.SIGKILL)


ACCOUNTS = """accounts {
  APP: { jetstream: enabled, users: [{user: app, password: app-pw}] }
  BILLING: { jetstream: enabled, users: [{user: billing, password: billing-pw}] }
  SYS: { users: [{user: ops, password: ops-pw}] }
}
system_account: SYS
"""


@pytest.fixture
def account_nodes(tmp_path) -> Iterator[list[NatsServer]]:
    """The three nodes with accounts APP and BILLING, and SYS as the system account."""
    conf = tmp_path / "accounts.conf"
    conf.write_text(ACCOUNTS)
    servers = cluster(tmp_path / "cluster")
    for node in servers:
        node.extra_args = ["-c", str(conf)]
    yield _started(servers)
    for node in servers:
        node.stop(signal.SIGKILL)


async def _workload(urls: list[str], loop: LoopThread) -> tuple[str, PullWorker]:
    """An R3 stream CQ with a consumer a worker pulls from (busy) and one nobody pulls (idle), and
    an R1 stream ONE with one consumer (solo); the name of the server ONE lives on."""
    await cluster_ready(",".join(urls), "READY")
    nc = await nats.connect(urls, max_reconnect_attempts=-1)
    api = JetStreamAPI(nc, timeout=10)
    await api.add_stream({"name": "CQ", "subjects": ["cq.>"], "num_replicas": 3})
    await api.add_stream({"name": "ONE", "subjects": ["one.>"], "num_replicas": 1})
    for stream, name in (("CQ", "busy"), ("CQ", "idle"), ("ONE", "solo")):
        await make_consumer(api, stream, name)
    await publish(nc, "cq.work", 5)
    worker = PullWorker(nc, "CQ", "busy", name="worker", expires_s=2.0).start()
    home = (await api.stream_info("ONE"))["cluster"]["leader"]
    return home, worker


LAST_SEEN: dict[str, tuple[str, str]] = {}


def _verdicts(db: str) -> dict[str, tuple[str, str]]:
    """Each consumer's (verdict, reason), as `status --json` says; kept in LAST_SEEN for a failure's message."""
    LAST_SEEN.clear()
    LAST_SEEN.update({r["consumer"]: (r["verdict"], r["reason"]) for r in status_json(db)})
    return dict(LAST_SEEN)


def _until(predicate: Callable[[], T], timeout: float, message: str) -> T:
    """wait_until, polling the store once a second, saying on a timeout what the consumers were."""
    try:
        return wait_until(predicate, timeout=timeout, interval=1.0, message=message)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the consumers as last seen: {LAST_SEEN}") from None


def _replica_findings(db: str) -> dict[str, str]:
    """consumer -> the replicas its replica_not_current finding names, as `status --json` says."""
    return {r["consumer"]: f["numbers"]["replicas"] for r in status_json(db) for f in r["config_findings"]
            if f.get("kind") == "replica_not_current"}


def _check(db: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["check", "--db", db])
    return code, out.getvalue()


def _named_in_time(killed: float, log: Path, scenario: str) -> None:
    """Named within NAMED_WITHIN of the kill at `killed` (monotonic); if not, the collector's log
    since the kill says where the time went. The time is noted for bench.cluster_incidents."""
    took = time.monotonic() - killed
    said_named(scenario, took, NAMED_WITHIN)
    if took <= NAMED_WITHIN:
        return
    since = (dt.datetime.now() - dt.timedelta(seconds=took)).strftime("%Y-%m-%d %H:%M:%S")
    lines = [line for line in log.read_text(errors="replace").splitlines() if line[:19] >= since and line[:2] == "20"]
    raise AssertionError(f"named {took:.1f} s after the kill at {since}; the collector since:\n" +
                         "\n".join(line[:300] for line in lines[-60:]))


def _stays_named(db: str, names: set[str], seconds: float, listed: frozenset[str] = frozenset({"busy", "idle", "solo"})
                 ) -> None:
    """Every judged cycle for `seconds`: each of `names` keeps a cluster verdict, and every
    consumer (`listed`) stays listed."""
    deadline, judged = time.monotonic() + seconds, set()
    while time.monotonic() < deadline:
        rows = status_json(db)
        assert {r["consumer"] for r in rows} == listed, rows
        for r in rows:
            if r["consumer"] in names:
                assert r["verdict"] in CLUSTER_RED, r
                judged.add(r["judged_at"])
        time.sleep(1.0)
    assert len(judged) >= 2, "the collector judged no new cycle while the cluster was down"


def _served_again(db: str, message: str) -> None:
    """Every consumer leaves its cluster verdict once its servers are back, none dropped on the way."""
    _until(lambda: {c: v for c, v in _verdicts(db).items() if v[0] in CLUSTER_RED} == {}
           and set(LAST_SEEN) == {"busy", "idle", "solo"}, timeout=120, message=message)


def _wind_down(collector: subprocess.Popen[bytes], loop: LoopThread, worker: PullWorker) -> None:
    collector.send_signal(signal.SIGTERM)
    collector.wait(30)
    with contextlib.suppress(Exception):
        loop.call(asyncio.wait_for(worker.stop(), 15))
    loop.close()


def _peers_killed_and_held_named(nodes: list[NatsServer], survivor: NatsServer, db: str, log: Path,
                                 scenario: str) -> None:
    """The survivor's two peers SIGKILLed: its consumer `held` is named NO_LEADER in the server's
    own words (QUORUM_LOST) within NAMED_WITHIN, with the peers it lost, by name."""
    for node in nodes:
        if node is not survivor:
            node.stop(signal.SIGKILL)
    killed = time.monotonic()
    said = _until(lambda: (v := _verdicts(db))["held"][0] == "NO_LEADER" and "QUORUM_LOST" in v["held"][1]
                  and v, timeout=NAMED_WITHIN + 15, message="held named NO_LEADER for its lost quorum")
    _named_in_time(killed, log, scenario)
    assert any(n.name in said["held"][1] for n in nodes if n is not survivor), said


def _fleet_outages(monkeypatch: pytest.MonkeyPatch, db: str, server: str) -> list[str]:
    """The Fleet page's cluster-failure blocks, as the real page draws them on this store."""
    pages_on(monkeypatch, db, server)
    st.cache_data.clear()
    at = run_app()
    return [e.value for e in at.error if "Next step" in e.value]


@pytest.mark.parametrize("mode", ["list", "jsz"])
def test_servers_killed_under_the_consumers_are_named_for_what_they_are_and_nothing_vanishes(nodes, tmp_path,
                                                                                             mode, monkeypatch,
                                                                                             cluster_hold):
    urls = [n.url for n in nodes]
    db = str(tmp_path / "jetwatch.duckdb")
    loop = LoopThread()
    home, worker = loop.call(_workload(urls, loop))
    args = [sys.executable, "-m", "jetwatch.cli", "collect", "--server", ",".join(urls), "--db", db,
            "--include-streams", "CQ,ONE"]
    if mode == "jsz":
        args += ["--monitor-url", ",".join(str(n.monitor_url) for n in nodes)]
    with open(tmp_path / "collector.log", "wb") as log:
        collector = subprocess.Popen(args, env=clean_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: Path(db).exists() and {r["consumer"] for r in status_json(db)} == {"busy", "idle", "solo"},
                   timeout=60, message="the three consumers judged")

        # The server holding the R1 stream dies; the meta group and the R3 consumers survive it.
        doomed = next(n for n in nodes if n.name == home)
        doomed.stop(signal.SIGKILL)
        killed = time.monotonic()
        said = _until(lambda: (v := _verdicts(db))["solo"][0] == "NO_LEADER" and v, timeout=NAMED_WITHIN + 15,
                          message="solo, whose only server died, judged NO_LEADER")
        _named_in_time(killed, tmp_path / "collector.log", f"R1 stream's server SIGKILLed ({mode})")
        assert home in said["solo"][1] or "missing" in said["solo"][1], said["solo"]
        assert said["busy"][0] not in CLUSTER_RED and said["idle"][0] not in CLUSTER_RED, said  # re-elected, serving
        # Serving on two of three: each R3 consumer carries the finding that one more failure stops it.
        at_risk = _until(lambda: (r := _replica_findings(db)).keys() >= {"busy", "idle"} and r,
                         timeout=NAMED_WITHIN, message="the R3 consumers' replica finding")
        assert all(home in at_risk[c] for c in ("busy", "idle")), at_risk

        # A second server dies: the R3 consumers lose their quorum, the cluster its meta leader.
        second = next(n for n in nodes if n is not doomed and n.url != urls[-1])
        second.stop(signal.SIGKILL)
        killed = time.monotonic()
        _until(lambda: all(v[0] in CLUSTER_RED for v in _verdicts(db).values()), timeout=NAMED_WITHIN + 15,
                   message="every consumer named for the cluster")
        _named_in_time(killed, tmp_path / "collector.log", f"quorum lost: two of three SIGKILLed ({mode})")
        # The Fleet says each failure once, above its rows: every consumer in exactly one block.
        blocks = _fleet_outages(monkeypatch, db, urls[-1])
        assert sorted(c for b in blocks for c in ("busy", "idle", "solo") if f" {c}" in b or f"({c}" in b) == \
            ["busy", "idle", "solo"], blocks
        assert all(" since " in b and ("no server leads" in b or "does not answer" in b) for b in blocks), blocks
        _stays_named(db, {"busy", "idle", "solo"}, cluster_hold)
        code, text = _check(db)
        assert code == 2 and "collector stopped" not in text, text
        assert any(v in text for v in CLUSTER_RED), text

        # A collector restarted in the middle of the outage knows the consumers from its store and
        # names them from its first cycles on, never nothing at all.
        collector.send_signal(signal.SIGTERM)
        collector.wait(30)
        assert collector.returncode == 0, (tmp_path / "collector.log").read_text()[-3000:]
        restarted = dt.datetime.now(dt.UTC)
        with open(tmp_path / "collector-again.log", "wb") as log:
            collector = subprocess.Popen(args, env=clean_env(), stdout=log, stderr=subprocess.STDOUT)
        again = time.monotonic()
        _until(lambda: {r["consumer"]: r["verdict"] for r in status_json(db)
                        if dt.datetime.fromisoformat(r["judged_at"]) > restarted}.keys() == {"busy", "idle", "solo"}
               and all(v[0] in CLUSTER_RED for v in _verdicts(db).values()), timeout=NAMED_WITHIN + 15,
               message="every consumer named by the restarted collector")
        _named_in_time(again, tmp_path / "collector-again.log", f"collector restarted mid-outage ({mode})")

        # The servers come back: every consumer leaves its cluster verdict and none was dropped on
        # the way; the collector started mid-outage reads the capture stream durably again.
        for node in (doomed, second):
            node.start()
        _served_again(db, "every consumer served again once its servers are back")
        wait_until(lambda: "captured durably" in (tmp_path / "collector-again.log").read_text(errors="replace"),
                   timeout=60, interval=1.0, message="the capture back on the capture stream")
    finally:
        _wind_down(collector, loop, worker)
    assert collector.returncode == 0, (tmp_path / "collector.log").read_text()[-3000:]



async def _held_by_one(urls: list[str]) -> str:
    """An R3 stream QL with one consumer, `held`; the server that leads the consumer."""
    await cluster_ready(",".join(urls), "READY")
    nc = await nats.connect(urls)
    api = JetStreamAPI(nc, timeout=10)
    await api.add_stream({"name": "QL", "subjects": ["ql.>"], "num_replicas": 3})
    await make_consumer(api, "QL", "held")
    leader = (await api.consumer_info("QL", "held"))["cluster"]["leader"]
    await nc.close()
    return leader


def test_a_leader_that_lost_its_quorum_is_named_in_the_servers_own_words(nodes, tmp_path, cluster_hold):
    """The consumer's leader survives, its two peers die: it steps down and says QUORUM_LOST on the
    account, which the collector (connected to that server) hears by subscription even though the
    capture stream and the meta group are gone with the peers."""
    loop = LoopThread()
    try:
        leader = loop.call(_held_by_one([n.url for n in nodes]))
    finally:
        loop.close()
    survivor = next(n for n in nodes if n.name == leader)
    db = str(tmp_path / "jetwatch.duckdb")
    args = [sys.executable, "-m", "jetwatch.cli", "collect", "--server", survivor.url, "--db", db,
            "--include-streams", "QL"]
    with open(tmp_path / "collector.log", "wb") as log:
        collector = subprocess.Popen(args, env=clean_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: Path(db).exists() and {r["consumer"] for r in status_json(db)} == {"held"},
                   timeout=60, message="the consumer judged")
        _peers_killed_and_held_named(nodes, survivor, db, tmp_path / "collector.log",
                                     "a leader's peers SIGKILLed: QUORUM_LOST (list)")
        assert "lost its quorum (QUORUM_LOST)" in (tmp_path / "collector.log").read_text()
        _stays_named(db, {"held"}, cluster_hold, frozenset({"held"}))
    finally:
        collector.send_signal(signal.SIGTERM)
        collector.wait(30)
    assert collector.returncode == 0, (tmp_path / "collector.log").read_text()[-3000:]


# A hung server keeps its socket open and answers nothing, in both modes; a stopped one (SIGTERM)
# is at once a placeholder in CONSUMER.LIST's reply (JSZ mode sees it as the killed one above).
@pytest.mark.parametrize(("how", "mode"), [("hung", "list"), ("hung", "jsz"), ("stopped", "list")])
def test_a_server_hung_or_stopped_is_left_and_the_consumer_it_alone_serves_is_named(nodes, tmp_path, how, mode,
                                                                                  cluster_hold):
    """The server the collector is connected to, which alone holds the R1 stream, hangs (SIGSTOP:
    requests time out rather than fail) or stops (SIGTERM). The collector leaves it for a live
    server by itself, names the R1 consumer NO_LEADER within 30 s and keeps it named; the R3
    consumers, re-elected elsewhere, are not red. Once the server is back, all serve again."""
    urls = [n.url for n in nodes]
    db = str(tmp_path / "jetwatch.duckdb")
    loop = LoopThread()
    home, worker = loop.call(_workload(urls, loop))
    gone = next(n for n in nodes if n.name == home)
    # Only that server is given: the others are learnt from it, as behind a load balancer.
    args = [sys.executable, "-m", "jetwatch.cli", "collect", "--server", gone.url, "--db", db,
            "--include-streams", "CQ,ONE"]
    if mode == "jsz":
        args += ["--monitor-url", ",".join(str(n.monitor_url) for n in nodes)]
    with open(tmp_path / "collector.log", "wb") as log:
        collector = subprocess.Popen(args, env=clean_env(), stdout=log, stderr=subprocess.STDOUT)
    stopped = False
    try:
        wait_until(lambda: Path(db).exists() and {r["consumer"] for r in status_json(db)} == {"busy", "idle", "solo"},
                   timeout=60, message="the three consumers judged")
        assert gone.proc is not None
        if how == "hung":
            gone.proc.send_signal(signal.SIGSTOP)
            stopped = True
        else:
            gone.stop(signal.SIGTERM)
        signalled = time.monotonic()
        said = _until(lambda: (v := _verdicts(db))["solo"][0] == "NO_LEADER" and v, timeout=NAMED_WITHIN + 15,
                      message=f"solo, whose only server is {how}, judged NO_LEADER")
        _named_in_time(signalled, tmp_path / "collector.log",
                       f"the R1 stream's server {'hung (SIGSTOP)' if how == 'hung' else 'stopped (SIGTERM)'} ({mode})")
        assert home in said["solo"][1] or "missing" in said["solo"][1] or "placeholder" in said["solo"][1], said
        assert said["busy"][0] not in CLUSTER_RED and said["idle"][0] not in CLUSTER_RED, said
        _stays_named(db, {"solo"}, cluster_hold)
        assert "reconnected to NATS" in (tmp_path / "collector.log").read_text(errors="replace")

        if how == "hung":
            gone.proc.send_signal(signal.SIGCONT)
            stopped = False
        else:
            gone.start()
        _served_again(db, "every consumer served again once the server is back")
    finally:
        if stopped and gone.proc is not None:
            gone.proc.send_signal(signal.SIGCONT)
        _wind_down(collector, loop, worker)
    assert collector.returncode == 0, (tmp_path / "collector.log").read_text()[-3000:]


async def _billing_held(urls: list[str]) -> str:
    """Account BILLING's R3 stream QB with one consumer, `held`; the server that leads the consumer."""
    nc = await nats.connect(urls, user="billing", password="billing-pw")
    api = JetStreamAPI(nc, timeout=10)
    deadline = time.monotonic() + 60
    while True:  # the meta group elects its leader after the servers start
        try:
            await api.add_stream({"name": "QB", "subjects": ["qb.>"], "num_replicas": 3})
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
    await make_consumer(api, "QB", "held")
    leader = (await api.consumer_info("QB", "held"))["cluster"]["leader"]
    await nc.close()
    return leader


def test_a_lost_quorum_in_an_account_the_collector_is_not_in_is_named_from_the_system_copy(account_nodes, tmp_path,
                                                                                           cluster_hold):
    """The collector connects as APP and samples every account through the system account; a
    BILLING consumer's leader loses its peers and steps down. QUORUM_LOST reaches APP's
    connection only for APP's consumers: the system account's copy, which names the account, is
    what names BILLING's consumer in the server's own words."""
    nodes = account_nodes
    loop = LoopThread()
    try:
        leader = loop.call(_billing_held([n.url for n in nodes]))
    finally:
        loop.close()
    survivor = next(n for n in nodes if n.name == leader)
    contexts = tmp_path / "cfg" / "nats" / "context"
    contexts.mkdir(parents=True)
    (contexts / "ops.json").write_text(json.dumps({"url": survivor.url, "user": "ops", "password": "ops-pw"}))
    db = str(tmp_path / "jetwatch.duckdb")
    args = [sys.executable, "-m", "jetwatch.cli", "collect", "--server", survivor.url, "--user", "app",
            "--password", "app-pw", "--system-context", "ops", "--db", db, "--include-streams", "QB"]
    with open(tmp_path / "collector.log", "wb") as log:
        collector = subprocess.Popen(args, env=clean_env(XDG_CONFIG_HOME=str(tmp_path / "cfg")), stdout=log,
                                     stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: Path(db).exists() and {(r["account"], r["consumer"]) for r in status_json(db)}
                   == {("BILLING", "held")}, timeout=60, message="BILLING's consumer judged")
        _peers_killed_and_held_named(nodes, survivor, db, tmp_path / "collector.log",
                                     "QUORUM_LOST in another account, from the system account's copy (JSZ)")
        _stays_named(db, {"held"}, cluster_hold, frozenset({"held"}))
    finally:
        collector.send_signal(signal.SIGTERM)
        collector.wait(30)
    assert collector.returncode == 0, (tmp_path / "collector.log").read_text()[-3000:]


LDM_CONF = 'lame_duck_duration: "30s"\nlame_duck_grace_period: "1s"\n'  # 30 s: the least the server takes


def _healthy(node: NatsServer) -> bool:
    """The server is up and its JetStream assets are current (its /healthz answers 200)."""
    try:
        with urllib.request.urlopen(f"{node.monitor_url}/healthz", timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


@pytest.mark.parametrize("mode", ["list", "jsz"])
def test_a_rolling_restart_and_a_server_in_lame_duck_mode_raise_no_red_verdict(tmp_path, mode):
    """Maintenance, not an incident: each server restarted in turn (SIGTERM, started again once the
    one before is current), then the consumer leader's server put in lame-duck mode (its leaders
    move away, it stops). Elections take seconds: no consumer is ever red, none leaves the list (in
    JSZ mode one did: its followers named a leader whose report, the server just restarted, did
    not carry it yet)."""
    conf = tmp_path / "ldm.conf"
    conf.write_text(LDM_CONF)
    nodes = cluster(tmp_path / "cluster")
    for node in nodes:
        node.extra_args = ["-c", str(conf)]
    _started(nodes)
    urls = [n.url for n in nodes]
    db = str(tmp_path / "jetwatch.duckdb")
    loop = LoopThread()
    seen_red: list[tuple[str, str, str]] = []
    collector = None
    try:
        home, worker = loop.call(_workload(urls, loop))
        args = [sys.executable, "-m", "jetwatch.cli", "collect", "--server", ",".join(urls), "--db", db,
                "--include-streams", "CQ,ONE"]
        if mode == "jsz":
            args += ["--monitor-url", ",".join(str(n.monitor_url) for n in nodes)]
        with open(tmp_path / "collector.log", "wb") as log:
            collector = subprocess.Popen(args, env=clean_env(), stdout=log, stderr=subprocess.STDOUT)
        wait_until(lambda: Path(db).exists() and {r["consumer"] for r in status_json(db)} == {"busy", "idle", "solo"},
                   timeout=60, message="the three consumers judged")

        def watched(done: Callable[[], bool], timeout: float, message: str) -> None:
            """Wait for `done`, reading the verdicts every second meanwhile: any red one is kept."""
            def check() -> bool:
                said = status_json(db)
                assert {r["consumer"] for r in said} == {"busy", "idle", "solo"}, said
                seen_red.extend((r["consumer"], r["verdict"], r["reason"]) for r in said if r["level"] == "critical")
                return done()
            wait_until(check, timeout=timeout, interval=1.0, message=message)

        for node in nodes:
            node.stop(signal.SIGTERM)
            node.start()
            watched(lambda n=node: _healthy(n), 90, f"{node.name} current again after its restart")
        busy_leader = loop.call(_leader_of(urls, "CQ", "busy"))
        ldm = next(n for n in nodes if n.name == busy_leader)
        assert ldm.proc is not None
        subprocess.run([nats_server_binary(), "--signal", f"ldm={ldm.proc.pid}"], check=True, timeout=10)
        watched(lambda: ldm.proc is not None and ldm.proc.poll() is not None, 90, "the lame-duck server gone")
        assert ldm.log_path is not None and "entering lame duck mode" in ldm.log_path.read_text().lower()
        ldm.start()
        watched(lambda: _healthy(ldm), 90, f"{ldm.name} current again after lame duck")
        after = time.monotonic() + 20  # longer than --no-leader-after: what the last step began would show
        watched(lambda: time.monotonic() > after, 40, "twenty seconds more")
        assert not seen_red, seen_red
    finally:
        if collector is not None:
            collector.send_signal(signal.SIGTERM)
            collector.wait(30)
        loop.close()
        for node in nodes:
            node.stop(signal.SIGKILL)
    assert collector.returncode == 0, (tmp_path / "collector.log").read_text()[-3000:]


async def _leader_of(urls: list[str], stream: str, consumer: str) -> str:
    nc = await nats.connect(urls)
    try:
        return str((await JetStreamAPI(nc, timeout=10).consumer_info(stream, consumer))["cluster"]["leader"])
    finally:
        await nc.close()


@pytest.mark.parametrize("mode", ["list", "jsz"])
def test_a_slow_follower_stopped_for_a_minute_raises_no_red_verdict(nodes, tmp_path, mode):
    """A follower of the worked consumer freezes for 60 s (SIGSTOP: a host paused, a long GC) and
    comes back (SIGCONT): elections move what it led, the R3 consumers keep their quorum on the
    other two, and the follower catches up. At most the finding that one more failure stops them;
    never a red verdict, and no consumer leaves the list, in either sampling mode (in JSZ mode its
    /jsz times out meanwhile)."""
    urls = [n.url for n in nodes]
    db = str(tmp_path / "jetwatch.duckdb")
    loop = LoopThread()
    home, worker = loop.call(_workload(urls, loop))
    busy_leader = loop.call(_leader_of(urls, "CQ", "busy"))
    slow = next(n for n in nodes if n.name not in (home, busy_leader))  # leads neither the R1 stream nor busy
    others = [n for n in nodes if n is not slow]
    args = [sys.executable, "-m", "jetwatch.cli", "collect", "--server", ",".join(n.url for n in others), "--db", db,
            "--include-streams", "CQ,ONE"]
    if mode == "jsz":
        args += ["--monitor-url", ",".join(str(n.monitor_url) for n in nodes)]
    with open(tmp_path / "collector.log", "wb") as log:
        collector = subprocess.Popen(args, env=clean_env(), stdout=log, stderr=subprocess.STDOUT)
    seen_red: list[tuple[str, str, str]] = []
    findings: set[str] = set()

    def watched(until: float) -> bool:
        said = status_json(db)
        assert {r["consumer"] for r in said} == {"busy", "idle", "solo"}, said
        seen_red.extend((r["consumer"], r["verdict"], r["reason"]) for r in said if r["level"] == "critical")
        findings.update(r["consumer"] for r in said for f in r["config_findings"] if f.get("kind") == "replica_not_current")
        return time.monotonic() > until

    assert slow.proc is not None
    stopped = False
    try:
        wait_until(lambda: Path(db).exists() and {r["consumer"] for r in status_json(db)} == {"busy", "idle", "solo"},
                   timeout=60, message="the three consumers judged")
        slow.proc.send_signal(signal.SIGSTOP)
        stopped = True
        until = time.monotonic() + 60
        wait_until(lambda: watched(until), timeout=90, interval=1.0, message="a minute with the follower stopped")
        slow.proc.send_signal(signal.SIGCONT)
        stopped = False
        wait_until(lambda: watched(0) and _healthy(slow), timeout=90, interval=1.0, message="the follower current again")
        after = time.monotonic() + 20  # longer than --no-leader-after: what the stop began would show by then
        wait_until(lambda: watched(after), timeout=40, interval=1.0, message="twenty seconds more")
        assert not seen_red, seen_red
        assert "busy" in findings, "the worked consumer never carried the finding that one more failure stops it"
    finally:
        if stopped:
            slow.proc.send_signal(signal.SIGCONT)
        _wind_down(collector, loop, worker)
    assert collector.returncode == 0, (tmp_path / "collector.log").read_text()[-3000:]
