"""The collector against a real server: completeness, durability and faults."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import nats

from jetwatch.core.embedded_server import NatsServer
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.demo.workers import PullWorker
from jetwatch.store.database import Store
from tests.helpers import (
    clean_env,
    collecting,
    collector_settings,
    eventually,
    make_consumer,
    make_stream,
    publish,
    rows,
    wait_until,
)

PIN_ROWS = ("SELECT event, pinned_id, reason, source FROM pin_events WHERE stream = ? "
            "ORDER BY ts, CASE event WHEN 'unpinned' THEN 0 ELSE 1 END")


def collector_process(server_url: str, db: str, streams: str, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "JETWATCH_INCLUDE_STREAMS": streams, "JETWATCH_INFERENCE_GRACE": "1.5s"}
    return subprocess.Popen(
        [sys.executable, "-m", "jetwatch.cli", "collect", "--server", server_url, "--db", db,
         "--interval", "0.5s", *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_stream_with_600_consumers_is_sampled_completely_each_cycle(nats_server, db_path, uid, run):
    stream = f"{uid}_MANY"
    store = Store(db_path)

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.>"])
        await asyncio.gather(*(make_consumer(api, stream, f"c{i:03d}") for i in range(600)))
        async with collecting(collector_settings(nats_server.url, db_path, (stream,))) as collector:
            cycles = collector.cycles
            await eventually(lambda: collector.cycles >= cycles + 2, message="two more cycles")
            per_cycle = rows(store, "SELECT ts, count(*) FROM samples WHERE stream = ? GROUP BY ts", [stream])
            # Each CONSUMER.LIST page carries its own server time, so count per collector cycle instead.
            total = rows(store, "SELECT count(*), count(DISTINCT consumer) FROM samples WHERE stream = ?", [stream])[0]
            assert total[1] == 600
            assert total[0] % 600 == 0 and total[0] >= 1200, per_cycle[:3]
            assert rows(store, "SELECT count(*) FROM consumer_latest WHERE stream = ?", [stream]) == [(600,)]

            await api.delete_consumer(stream, "c000")
            await make_consumer(api, stream, "new-one")
            names = "SELECT consumer FROM consumer_latest WHERE stream = ? AND consumer IN ('c000', 'new-one')"
            await eventually(lambda: rows(store, names, [stream]) == [("new-one",)],
                             message="deleted consumer gone, new one present")
            assert rows(store, "SELECT count(*) FROM consumer_latest WHERE stream = ?", [stream]) == [(600,)]
        await nc.close()

    run(scenario())


def test_pin_switches_while_collector_is_stopped_appear_once_after_restart(nats_server, db_path, uid, run):
    stream, consumer = f"{uid}_RESTART", "w"
    store = Store(db_path)
    settings = collector_settings(nats_server.url, db_path, (stream,))

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.work"])
        await make_consumer(api, stream, consumer, "pinned_client", timeout_s=30)
        workers = [PullWorker(nc, stream, consumer, "jobs", name=n).start() for n in "ab"]
        async with collecting(settings):
            await publish(nc, f"{uid}.work", 2)
            await eventually(lambda: len(rows(store, PIN_ROWS, [stream])) >= 1, message="first pin stored")
        # Collector stopped: three admin unpins, each followed by a new pin.
        seen_pins = {w.pin_id for w in workers if w.pin_id}
        for _ in range(3):
            await api.unpin(stream, consumer, "jobs")
            await publish(nc, f"{uid}.work", 2)
            await eventually(lambda: {w.pin_id for w in workers if w.pin_id} - seen_pins, message="new pin")
            seen_pins |= {w.pin_id for w in workers if w.pin_id}
        async with collecting(settings) as collector:
            await eventually(lambda: len(rows(store, PIN_ROWS, [stream])) >= 7, message="backlog stored")
            # Let the reconciler see caught-up state for longer than its grace period.
            target = collector.cycles + 6
            await eventually(lambda: collector.cycles >= target, message="cycles past the grace period")
        history = rows(store, PIN_ROWS, [stream])
        assert [h[0] for h in history] == ["pinned", "unpinned"] * 3 + ["pinned"]
        assert [h[2] for h in history if h[0] == "unpinned"] == ["admin"] * 3
        assert {h[3] for h in history} == {"advisory"}
        assert len({h[1] for h in history if h[0] == "pinned"}) == 4
        for w in workers:
            await w.stop()
        await nc.close()

    run(scenario())


def test_sigkilled_collector_loses_no_advisory(nats_server, db_path, uid, run):
    stream, consumer = f"{uid}_KILL", "w"
    store = Store(db_path)

    async def churn(api: JetStreamAPI, nc: nats.NATS, count: int) -> None:
        for _ in range(count):
            await api.unpin(stream, consumer, "jobs")

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.work"])
        await make_consumer(api, stream, consumer, "pinned_client", timeout_s=30)
        proc = collector_process(nats_server.url, db_path, stream)
        try:
            await eventually(lambda: store.exists() and rows(store, "SELECT count(*) FROM collector_status")[0][0] > 0,
                             message="collector running")
            # Every unpin sends an UNPINNED advisory even with nothing pinned: a steady flow of events.
            await churn(api, nc, 300)
            await eventually(lambda: rows(store, "SELECT count(*) FROM advisories WHERE stream = ?", [stream])[0][0] > 20,
                             message="some advisories stored")
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            await churn(api, nc, 100)
        finally:
            if proc.poll() is None:
                proc.kill()
        sent = 400
        proc = collector_process(nats_server.url, db_path, stream)
        try:
            await eventually(
                lambda: rows(store, "SELECT count(*) FROM advisories WHERE stream = ? AND kind = 'consumer_group_unpinned'",
                             [stream])[0][0] >= sent, timeout=60, message="every advisory stored")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
        stored = rows(store, "SELECT count(*), count(DISTINCT id) FROM advisories "
                             "WHERE stream = ? AND kind = 'consumer_group_unpinned'", [stream])[0]
        assert stored == (sent, sent)
        await nc.close()

    run(scenario())


def test_malformed_advisories_are_kept_as_rejects_and_collection_goes_on(nats_server, db_path, uid, run):
    stream, consumer = f"{uid}_BAD", "w"
    store = Store(db_path)

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.work"])
        await make_consumer(api, stream, consumer, "pinned_client", timeout_s=30)
        async with collecting(collector_settings(nats_server.url, db_path, (stream,))):
            subject = f"$JS.EVENT.ADVISORY.CONSUMER.PINNED.{stream}.{consumer}"
            await nc.publish(subject, b"{not json")
            await nc.publish(subject, json.dumps({"type": "io.nats.jetstream.advisory.v1.consumer_group_pinned",
                                                  "timestamp": "2026-01-01T00:00:00Z"}).encode())
            await api.unpin(stream, consumer, "jobs")
            await eventually(lambda: rows(store, "SELECT count(*) FROM rejects WHERE origin = 'advisory'")[0][0] >= 2,
                             message="rejects stored")
            await eventually(lambda: rows(store, PIN_ROWS, [stream]), message="the good advisory stored")
        errors = [r[0] for r in rows(store, "SELECT error FROM rejects WHERE origin = 'advisory' ORDER BY error")]
        assert errors[0] == "advisory without an id"
        assert errors[1].startswith("not JSON")
        await nc.close()

    run(scenario())


def test_reader_process_never_fails_while_collector_writes(nats_server, db_path, uid, run, tmp_path):
    stream = f"{uid}_READ"
    reader_script = tmp_path / "reader.py"
    # The reader reads until its stdin closes, saying when its first read is done: it runs while
    # the collector writes however long starting Python takes on a loaded machine.
    reader_script.write_text(
        "import select, sys\n"
        "from store.database import Store\n"
        "s = Store(sys.argv[1], lock_timeout=30)\n"
        "n = errors = 0\n"
        "while not select.select([sys.stdin], [], [], 0)[0]:\n"
        "    try:\n"
        "        s.read(lambda c: c.execute('SELECT count(*) FROM consumer_latest').fetchall()); n += 1\n"
        "    except Exception as e:\n"
        "        errors += 1; print('ERR', e, flush=True)\n"
        "    if n + errors == 1:\n"
        "        print('reading', flush=True)\n"
        "print('reads', n, 'errors', errors)\n")

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.>"])
        for i in range(50):
            await make_consumer(api, stream, f"c{i}")
        async with collecting(collector_settings(nats_server.url, db_path, (stream,), interval=0.2)) as collector:
            reader = await asyncio.create_subprocess_exec(
                sys.executable, str(reader_script), db_path, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
            assert reader.stdin is not None and reader.stdout is not None
            first = await asyncio.wait_for(reader.stdout.readline(), timeout=60)
            start_cycles = collector.cycles
            await eventually(lambda: collector.cycles >= start_cycles + 5, timeout=60,
                             message="five collector cycles written while the reader reads")
            reader.stdin.close()
            out, _ = await asyncio.wait_for(reader.communicate(), timeout=60)
        text = first.decode() + out.decode()
        assert "errors 0" in text, text
        assert int(text.split("reads ")[1].split()[0]) >= 2, text
        await nc.close()

    run(scenario())


def test_collector_carries_on_when_the_server_restarts(tmp_path, run):
    server = NatsServer(store_dir=tmp_path / "js").start()
    db = str(tmp_path / "jw.duckdb")
    store = Store(db)
    proc = None
    try:
        async def create() -> None:
            nc = await nats.connect(server.url)
            api = JetStreamAPI(nc)
            await make_stream(api, "ORDERS", ["orders.>"], storage="file")
            await make_consumer(api, "ORDERS", "billing")
            await nc.close()
        run(create())
        proc = collector_process(server.url, db, "ORDERS")
        count = "SELECT count(*) FROM samples WHERE consumer = 'billing'"
        wait_until(lambda: store.exists() and rows(store, count)[0][0] >= 2, message="samples before restart")
        server.stop(signal.SIGKILL)
        before = rows(store, count)[0][0]
        server.start()
        wait_until(lambda: rows(store, count)[0][0] >= before + 3, timeout=30, message="samples after restart")
        assert proc.poll() is None, "collector is still running"
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=30)
            assert proc.returncode == 0, out.decode()[-3000:]
        server.stop()


def test_jsz_mode_reads_every_consumer_from_the_monitoring_endpoint(nats_server, db_path, uid, run):
    stream = f"{uid}_JSZ"
    store = Store(db_path)

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.>"])
        await make_consumer(api, stream, "a", "pinned_client", timeout_s=30)
        await make_consumer(api, stream, "b", max_ack_pending=7)
        await publish(nc, f"{uid}.x", 4)
        settings = collector_settings(nats_server.url, db_path, (stream,), monitor_url=(nats_server.monitor_url,))
        async with collecting(settings):
            pass
        got = rows(store, "SELECT consumer, num_pending, max_ack_pending, priority_policy, account "
                          "FROM consumer_latest WHERE stream = ? ORDER BY consumer", [stream])
        assert got == [("a", 4, 1000, "pinned_client", "$G"), ("b", 4, 7, None, "$G")]
        status = rows(store, "SELECT sample_mode FROM collector_status")
        assert status == [("jsz",)]
        await nc.close()

    run(scenario())


def test_a_store_locked_for_longer_than_the_timeout_loses_nothing(nats_server, db_path, uid, run, tmp_path):
    stream, consumer = f"{uid}_LOCK", "w"
    store = Store(db_path)
    holder = tmp_path / "hold.py"
    holder.write_text("import duckdb, sys, time\n"
                      "end = time.monotonic() + 30\n"
                      "while True:\n"  # the collector holds the file now and then: take a turn
                      "    try:\n"
                      "        c = duckdb.connect(sys.argv[1]); break\n"
                      "    except duckdb.IOException:\n"
                      "        if time.monotonic() > end: raise\n"
                      "        time.sleep(0.01)\n"
                      "print('held', flush=True)\n"
                      "sys.stdin.readline()\n"
                      "c.close()\n")

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.work"])
        await make_consumer(api, stream, consumer, "pinned_client", timeout_s=30)
        proc = collector_process(nats_server.url, db_path, stream, "--lock-timeout", "1s")
        try:
            await eventually(lambda: store.exists() and rows(store, "SELECT count(*) FROM collector_status")[0][0] > 0,
                             message="collector running")
            lock = await asyncio.create_subprocess_exec(sys.executable, str(holder), db_path,
                                                        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
            assert (await lock.stdout.readline()).strip() == b"held"
            for _ in range(20):
                await api.unpin(stream, consumer, "jobs")  # advisories while nobody can write the store
            # Longer than the lock timeout: the collector's writes fail, it says so and goes on.
            line = b""
            while b"stayed locked by another process" not in line:
                line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 120)
                assert line, "collector exited"
            lock.stdin.write(b"\n")
            await lock.wait()
            # Only the unpins: the capture stream may also hold this consumer's CREATED advisory.
            unpins = "SELECT count(*), count(DISTINCT id) FROM advisories WHERE stream = ? AND kind = 'consumer_group_unpinned'"
            await eventually(lambda: rows(store, unpins, [stream])[0][0] >= 20,
                             timeout=60, message="every unpin stored once the lock is gone")
            assert rows(store, unpins, [stream]) == [(20, 20)]
            assert proc.poll() is None
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
        assert proc.returncode == 0
        await nc.close()

    run(scenario())


def test_system_account_jsz_mode_samples_every_account_in_one_request(tmp_path, db_path, run):
    """With a system-account context, one PING.JSZ covers every account; the account's own
    connection still captures its advisories."""
    conf = tmp_path / "accounts.conf"
    conf.write_text("accounts {\n"
                    "  APP: { jetstream: enabled, users: [{user: app, password: app-pw}] }\n"
                    "  BILLING: { jetstream: enabled, users: [{user: billing, password: billing-pw}] }\n"
                    "  SYS: { users: [{user: ops, password: ops-pw}] }\n"
                    "}\nsystem_account: SYS\n")
    server = NatsServer(store_dir=tmp_path / "js", extra_args=["-c", str(conf)]).start()
    contexts = tmp_path / "cfg" / "nats" / "context"
    contexts.mkdir(parents=True)
    (contexts / "ops.json").write_text(json.dumps({"user": "ops", "password": "ops-pw"}))
    store = Store(db_path)

    async def scenario() -> None:
        for user, stream in (("app", "ORDERS"), ("billing", "INVOICES")):
            nc = await nats.connect(server.url, user=user, password=f"{user}-pw")
            api = JetStreamAPI(nc)
            await make_stream(api, stream, [f"{stream.lower()}.>"])
            await make_consumer(api, stream, "worker", "pinned_client", timeout_s=30)
            await publish(nc, f"{stream.lower()}.x", 3)
            await nc.close()

    run(scenario())
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "jetwatch.cli", "collect", "--server", server.url, "--user", "app",
         "--password", "app-pw", "--system-context", "ops", "--db", db_path, "--interval", "0.5s"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        latest = "SELECT account, stream, consumer, num_pending, priority_policy FROM consumer_latest ORDER BY account"
        wait_until(lambda: store.exists() and len(rows(store, latest)) == 2, timeout=30,
                   message="consumers of both accounts sampled")
        assert rows(store, latest) == [("APP", "ORDERS", "worker", 3, "pinned_client"),
                                       ("BILLING", "INVOICES", "worker", 3, "pinned_client")]
        assert rows(store, "SELECT sample_mode, capture_mode FROM collector_status") == [("system_jsz", "durable")]
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        server.stop()
    assert proc.returncode == 0, out.decode()[-3000:]


def test_a_cold_start_compiles_the_window_pass_before_it_holds_the_store(nats_server, tmp_path, uid, run):
    """numba's cache empty (a new container): the collector compiles its window pass before its
    first write, not inside it, so a reader that waits 3 s for the store is never turned away
    while the collector starts."""
    db = str(tmp_path / "jw.duckdb")
    stream = f"{uid}_COLD"

    async def setup() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid.lower()}.cold.>"])
        await make_consumer(api, stream, "work")
        await publish(nc, f"{uid.lower()}.cold.x", 3)
        await nc.close()

    run(setup())
    env = clean_env(NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"))
    with open(tmp_path / "collector.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "jetwatch.cli", "collect", "--server", nats_server.url,
                                 "--db", db, "--include-streams", stream, "--interval", "0.5s"],
                                env=env, stdout=log, stderr=subprocess.STDOUT)
    refused: list[str] = []

    def judged() -> bool:
        out = subprocess.run([sys.executable, "-m", "jetwatch.cli", "status", "--json", "--db", db,
                              "--lock-timeout", "3s"], env=clean_env(), capture_output=True, text=True, timeout=60)
        if out.returncode != 0 and "locked" in out.stderr:
            refused.append(out.stderr[-300:])
        return out.returncode == 0 and stream in out.stdout

    try:
        wait_until(judged, timeout=120, interval=0.2, message="the consumer judged")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert not refused, refused
