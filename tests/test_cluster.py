"""A three-node loopback cluster: a consumer leader change clears the pin with no advisory."""

from __future__ import annotations

import datetime as dt
import json

import nats
import pytest

from jetwatch.core.embedded_server import cluster
from jetwatch.core.jsapi import JetStreamAPI, JetStreamAPIError, NoReply
from jetwatch.core.settings import Settings
from jetwatch.demo.workers import PullWorker
from jetwatch.health import pin_causes
from jetwatch.store.database import Store
from tests.helpers import collecting, collector_settings, eventually, make_consumer, publish, rows
from tests.incident_library import cluster_ready, judged, leader_changes, run_library
from tests.test_dashboard import run_app

# Serial: three routed servers keep their leaders by Raft timeouts, and on a machine starved by
# other tests a node misses heartbeats and the group elects again, adding events to the exact
# story these tests check. `make test` runs them after the parallel lane, one after another on one
# worker (never two clusters at once), beside the serial lane's other tests, which use little CPU.
pytestmark = [pytest.mark.cluster, pytest.mark.serial, pytest.mark.xdist_group("three_nodes")]

PIN_ROWS = ("SELECT event, pinned_id, reason, source FROM pin_events WHERE stream = 'JOBS' "
            "ORDER BY ts, CASE event WHEN 'unpinned' THEN 0 ELSE 1 END")


@pytest.fixture(scope="module")
def three_nodes(tmp_path_factory):
    nodes = cluster(tmp_path_factory.mktemp("cluster"))
    for node in nodes:
        node.start()
    yield nodes
    for node in nodes:
        node.stop()


async def _leader(api: JetStreamAPI) -> str:
    try:
        return (await api.consumer_info("JOBS", "work")).get("cluster", {}).get("leader", "")
    except (JetStreamAPIError, NoReply):
        return ""  # no leader during an election


def test_leader_stepdown_yields_one_inferred_unpin_and_the_next_pin_once(three_nodes, tmp_path, run, app_env):
    db = str(tmp_path / "jw.duckdb")
    store = Store(db)
    urls = ",".join(n.url for n in three_nodes)
    leaders: dict[str, str] = {}

    async def scenario() -> None:
        nc = await nats.connect(urls.split(","))
        api = JetStreamAPI(nc, timeout=10)
        await eventually(lambda: _try_stream(api), timeout=30, message="cluster accepts an R3 stream")
        await make_consumer(api, "JOBS", "work", "pinned_client", timeout_s=60, num_replicas=3)
        await eventually(lambda: _leader(api), timeout=30, message="consumer leader")
        worker = PullWorker(nc, "JOBS", "work", "jobs", name="w").start()
        async with collecting(collector_settings(urls, db, ("JOBS",), request_timeout=10.0)) as collector:
            await publish(nc, "jobs.x", 2)
            await eventually(lambda: worker.pin_id, timeout=30, message="first pin")
            first = worker.pin_id
            await eventually(lambda: rows(store, PIN_ROWS) == [("pinned", first, None, "advisory")],
                             timeout=30, message="first pin stored")
            old_leader = await _leader(api)
            reply = await nc.request("$JS.API.CONSUMER.LEADER.STEPDOWN.JOBS.work", b"", timeout=10)
            assert "error" not in json.loads(reply.data), reply.data
            await eventually(lambda: _leader(api), timeout=30, message="new consumer leader")
            assert await _leader(api) != old_leader
            await publish(nc, "jobs.x", 2)
            await eventually(lambda: worker.pin_id and worker.pin_id != first, timeout=30,
                             message="a new pin after the leader change")
            await eventually(lambda: len(rows(store, PIN_ROWS)) >= 3, timeout=30,
                             message="inferred unpin and new pin stored")
            target = collector.cycles + 6
            await eventually(lambda: collector.cycles >= target, timeout=30, message="cycles past grace")
            history = rows(store, PIN_ROWS)
            new_leader = await _leader(api)
            leaders.update(old=old_leader, new=new_leader)
        await worker.stop()
        await nc.close()
        assert history == [
            ("pinned", first, None, "advisory"),
            ("unpinned", None, None, "inferred"),
            ("pinned", worker.pin_id, None, "advisory"),
        ]
        # Why it moved: the consumer elected a leader between the two pins (LEADER_ELECTED, captured).
        now = dt.datetime.now(dt.UTC)
        [move] = store.read(lambda con: pin_causes.moves(con, now - dt.timedelta(hours=1), now, Settings())
                            ).to_dict("records")
        assert (move["cause"], move["from_pin"], move["to_pin"]) == ("leader_change", first, worker.pin_id)
        assert move["new_leader"] == new_leader
        assert pin_causes.why(move).startswith("consumer leader elected at ") and new_leader in pin_causes.why(move)

    run(scenario())
    # The Consumer page's cluster section: the leader now, and the change from the old one.
    app_env(db)
    at = run_app("views/consumer.py", stream="JOBS", consumer="work")
    said = [m.value for m in at.markdown if m.value.startswith("Led by")]
    assert said and said[0].startswith(f"Led by **{leaders['new']}** since "), said
    changes = [c.value for c in at.caption if "leader change" in c.value]
    assert changes and f"{leaders['old']} → {leaders['new']} at " in changes[0], changes


async def _try_stream(api: JetStreamAPI) -> bool:
    try:
        await api.add_stream({"name": "JOBS", "subjects": ["jobs.>"], "num_replicas": 3})
        return True
    except Exception:
        return False


def test_in_jsz_mode_a_server_that_stops_answering_keeps_the_consumers_it_led_and_is_named(tmp_path, run):
    """Three nodes sampled through their /jsz ports; the node leading stream S (one replica) is
    stopped: S's consumer keeps its last known state, cycle after cycle, and the status names
    the server that did not answer (before, the consumer vanished from the Fleet)."""
    from jetwatch.core.embedded_server import free_port
    nodes = cluster(tmp_path / "jsz")
    for node in nodes:
        node.monitor_port = free_port()
        node.start()
    db = str(tmp_path / "jetwatch.duckdb")
    store = Store(db)
    try:
        async def scenario() -> None:
            nc = await nats.connect(servers=[n.url for n in nodes], max_reconnect_attempts=-1)
            api = JetStreamAPI(nc)
            await eventually(lambda: _try(api, {"name": "S", "subjects": ["s.>"], "num_replicas": 1}), timeout=30,
                             message="a meta leader to create stream S")
            await make_consumer(api, "S", "c")
            leader = (await api.stream_info("S"))["cluster"]["leader"]
            doomed = next(n for n in nodes if n.name == leader)
            others = [n for n in nodes if n is not doomed]
            settings = collector_settings(",".join(n.url for n in others), db, ("S",),
                                          monitor_url=tuple(n.monitor_url for n in nodes), request_timeout=1.0)
            async with collecting(settings) as collector:
                await eventually(lambda: rows(store, "SELECT consumer, server FROM consumer_current")
                                 == [("c", leader)], timeout=30, message="S/c sampled from its leader")
                doomed.stop()
                await eventually(lambda: "did not answer" in str(rows(store, "SELECT last_error FROM collector_status")),
                                 timeout=30, message="the status names the server")
                assert leader in str(rows(store, "SELECT last_error FROM collector_status"))
                cycles = collector.cycles
                await eventually(lambda: collector.cycles >= cycles + 3, timeout=30, message="three more cycles")
                assert rows(store, "SELECT consumer, server FROM consumer_current") == [("c", leader)]
            await nc.close()

        run(scenario())
    finally:
        for node in nodes:
            node.stop()


async def _try(api: JetStreamAPI, config: dict) -> bool:
    """Create the stream, or find it created by an earlier try whose reply was lost."""
    for attempt in (api.add_stream, lambda c: api.stream_info(c["name"])):
        try:
            await attempt(config)
            return True
        except (JetStreamAPIError, NoReply):
            continue
    return False


@pytest.mark.incidents
def test_a_consumer_leader_change_raises_nothing_and_an_incident_stays_named_through_it(three_nodes, tmp_path, uid,
                                                                                         run):
    """The incident library's leader-change scenarios (tests/incident_library.py `leader_changes`)
    on R3 streams and consumers: a stepdown under a working pinned client with a standby raises
    nothing (no FLAPPING, no PIN_IDLE from the one re-pin); a stuck pinned client named STALLED
    before the stepdown stays STALLED after it, never back to OK, its since unchanged."""
    urls = ",".join(n.url for n in three_nodes)
    run(cluster_ready(urls, f"{uid}_READY"))
    outcome = run(run_library(urls, str(tmp_path / "jw.duckdb"), uid, leader_changes(), replicas=3))
    table = judged(outcome)
    report = "\n".join(f"{j.key}: expected {j.expected}, final {j.final}, "
                       f"{'named after ' + format(j.taken, '.1f') + ' s' if j.taken is not None else 'not named'}, "
                       f"raised {j.alarms}, later {j.later}{'' if j.ok else '  <-- WRONG: ' + j.reason}" for j in table)
    print("\nLEADER CHANGES\n" + report)
    assert all(j.ok and not j.later for j in table), report
    stuck = outcome.streams["stuckleader"]
    assert outcome.final[stuck][0] == "STALLED", report
    assert outcome.changes["stuckleader"][-1][0] < outcome.notes["stuckleader"]["stepped_down"], \
        "no verdict change after the leader change"
    assert abs(outcome.sinces[stuck] - outcome.notes["stuckleader"]["since"]) < 1e-3, \
        "the incident's since is its start, before and after the leader change"
