"""Connecting as the nats CLI does: credentials by flag, environment and context, against a real
server that requires them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from jetwatch.core.embedded_server import NatsServer
from jetwatch.store.database import Store
from tests.helpers import clean_env, rows, wait_until


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory):
    server = NatsServer(store_dir=tmp_path_factory.mktemp("auth") / "js",
                        extra_args=["--user", "jw", "--pass", "s3cret"]).start()
    yield server
    server.stop()


def _collect(args: list[str], env: dict[str, str], db: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "jetwatch.cli", "collect", "--db", db, "--interval", "0.5s",
                             "--connect-timeout", "2s", *args], env=env, stderr=subprocess.PIPE, text=True)


def _collects_one_cycle(args: list[str], env: dict[str, str], db: str, what: str) -> None:
    """A real collector process completes a cycle with these connection options, then stops cleanly."""
    proc = _collect(args, env, db)
    try:
        store = Store(db)
        wait_until(lambda: store.exists() and rows(store, "SELECT count(*) FROM collector_status")[0][0] == 1,
                   timeout=30, message=f"a cycle {what}")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_user_and_password_from_flags_and_environment(auth_server, tmp_path):
    _collects_one_cycle(["--server", auth_server.url, "--user", "jw"], clean_env(JETWATCH_PASSWORD="s3cret"),
                        str(tmp_path / "a.duckdb"), "with user/password")


def test_credentials_from_a_nats_context(auth_server, tmp_path):
    ctx = tmp_path / "cfg" / "nats" / "context"
    ctx.mkdir(parents=True)
    (ctx / "lab.json").write_text(json.dumps({"url": auth_server.url, "user": "jw", "password": "s3cret"}))
    _collects_one_cycle(["--context", "lab"], clean_env(XDG_CONFIG_HOME=str(tmp_path / "cfg")),
                        str(tmp_path / "c.duckdb"), "with the context's credentials")


def test_wrong_credentials_are_reported_in_words(auth_server, tmp_path):
    done = subprocess.run([sys.executable, "-m", "jetwatch.cli", "resume", "S", "C", "--yes", "--server",
                           auth_server.url, "--user", "jw", "--password", "wrong", "--connect-timeout", "2s", "--no-audit"],
                          capture_output=True, text=True, timeout=60, env=clean_env())
    assert done.returncode == 1
    assert f"could not connect to NATS at {auth_server.url}" in done.stderr
    assert "Check --server and the credentials" in done.stderr


def test_tls_with_a_ca_file(tmp_path):
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    ca_pem, cert_pem, key_pem = tmp_path / "ca.pem", tmp_path / "server.pem", tmp_path / "server.key"
    ca.cert_pem.write_to_path(str(ca_pem))
    cert.cert_chain_pems[0].write_to_path(str(cert_pem))
    cert.private_key_pem.write_to_path(str(key_pem))
    server = NatsServer(store_dir=tmp_path / "js", extra_args=["--tls", "--tlscert", str(cert_pem),
                                                                "--tlskey", str(key_pem)]).start()
    try:
        _collects_one_cycle(["--server", f"tls://127.0.0.1:{server.port}", "--tls-ca", str(ca_pem)], clean_env(),
                            str(tmp_path / "t.duckdb"), "over TLS")
    finally:
        server.stop()


def test_token_from_the_environment(tmp_path):
    server = NatsServer(store_dir=tmp_path / "js", extra_args=["--auth", "t0ken"]).start()
    try:
        _collects_one_cycle(["--server", server.url], clean_env(JETWATCH_TOKEN="t0ken"), str(tmp_path / "k.duckdb"),
                            "with a token")
    finally:
        server.stop()


def _refused_without_credentials(url: str) -> bool:
    """The server really demands credentials: a connection without them is refused."""
    import asyncio

    import nats

    async def attempt() -> bool:
        try:
            nc = await nats.connect(url, allow_reconnect=False, connect_timeout=2)
        except Exception:
            return True
        await nc.close()
        return False

    return asyncio.run(attempt())


def test_an_nkey_seed_file(tmp_path):
    import nkeys

    from tests.nats_jwt import identity

    user = identity(nkeys.PREFIX_BYTE_USER)
    conf = tmp_path / "nkey.conf"
    conf.write_text(f"authorization {{ users: [ {{ nkey: {user.public} }} ] }}\n")
    seed = tmp_path / "collector.nk"
    seed.write_bytes(user.seed)
    server = NatsServer(store_dir=tmp_path / "js", extra_args=["-c", str(conf)]).start()
    try:
        assert _refused_without_credentials(server.url)
        _collects_one_cycle(["--server", server.url, "--nkey", str(seed)], clean_env(), str(tmp_path / "n.duckdb"),
                            "with an NKey seed")
    finally:
        server.stop()


def test_a_creds_file_against_a_server_in_operator_mode(tmp_path):
    from tests.nats_jwt import operator_setup

    config, creds = operator_setup()
    conf = tmp_path / "operator.conf"
    conf.write_text(config)
    creds_file = tmp_path / "collector.creds"
    creds_file.write_text(creds)
    server = NatsServer(store_dir=tmp_path / "js", extra_args=["-c", str(conf)]).start()
    try:
        assert _refused_without_credentials(server.url)
        _collects_one_cycle(["--server", server.url], clean_env(JETWATCH_CREDS=str(creds_file)),
                            str(tmp_path / "j.duckdb"), "with a creds file")
    finally:
        server.stop()


def test_the_documented_least_privilege_permissions_are_enough_to_collect(tmp_path):
    """The collector's permissions as docs/security.md lists them (after an admin ran `jetwatch setup`):
    a full cycle, durable capture and a stored advisory, with nothing more allowed."""
    import asyncio

    import nats

    from jetwatch.core.jsapi import JetStreamAPI
    from tests.helpers import make_consumer, make_stream

    doc = (Path(__file__).resolve().parents[1] / "docs" / "security.md").read_text()
    block = doc.split("Collector (read-only apart from its own durable on the capture stream):", 1)[1]
    block = block.split("```", 2)[1]
    publish = block.split("publish:", 1)[1].split("subscribe:", 1)[0]
    allowed = [p.strip() for p in publish.replace("\n", " ").split(",") if p.strip()]
    conf = tmp_path / "perms.conf"
    conf.write_text("authorization { users: [\n"
                    "  { user: admin, password: admin-pw }\n"
                    f"  {{ user: watcher, password: watcher-pw, permissions: {{ publish: {json.dumps(allowed)}, "
                    "subscribe: [\"_INBOX.>\"] } }\n]}\n")
    server = NatsServer(store_dir=tmp_path / "js", extra_args=["-c", str(conf)]).start()
    db = str(tmp_path / "p.duckdb")
    try:
        admin = ["--server", server.url, "--user", "admin", "--password", "admin-pw"]
        done = subprocess.run([sys.executable, "-m", "jetwatch.cli", "setup", *admin], capture_output=True,
                              text=True, timeout=60, env=clean_env())
        assert done.returncode == 0, done.stderr

        async def workload() -> None:
            nc = await nats.connect(server.url, user="admin", password="admin-pw")
            api = JetStreamAPI(nc)
            await make_stream(api, "ORDERS", ["orders.>"])
            await make_consumer(api, "ORDERS", "worker", "pinned_client", timeout_s=30)
            await nc.request("orders.new", b"job", timeout=5)  # a backlog: its age is read exactly
            await nc.close()

        asyncio.run(workload())
        proc = _collect(["--server", server.url, "--user", "watcher"], clean_env(JETWATCH_PASSWORD="watcher-pw"), db)
        try:
            store = Store(db)
            wait_until(lambda: store.exists() and rows(store, "SELECT capture_mode FROM collector_status") == [("durable",)],
                       timeout=30, message="a cycle with durable capture")

            async def unpin() -> None:
                nc = await nats.connect(server.url, user="admin", password="admin-pw")
                await JetStreamAPI(nc).unpin("ORDERS", "worker", "jobs")
                await nc.close()

            asyncio.run(unpin())
            wait_until(lambda: rows(store, "SELECT count(*) FROM pin_events WHERE stream = 'ORDERS'") == [(1,)],
                       timeout=30, message="the admin unpin captured through the durable")
            assert rows(store, "SELECT consumer FROM consumer_latest") == [("worker",)]
            wait_until(lambda: rows(store, "SELECT oldest_unacked_age_kind FROM consumer_latest") == [("exact",)],
                       timeout=30, message="the backlog's age read from the stream (time lag's permissions)")
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err[-3000:]
        assert "Permissions Violation" not in err, err[-3000:]
    finally:
        server.stop()


def _permissions(doc: str, after: str) -> tuple[list[str], list[str]]:
    """The publish and subscribe lists of the first code block after `after` in docs/security.md."""
    block = doc.split(after, 1)[1].split("```", 2)[1]
    publish, subscribe = block.split("publish:", 1)[1].split("subscribe:", 1)
    def names(text: str) -> list[str]:
        return [p.strip() for p in text.split("(")[0].replace("\n", " ").split(",") if p.strip()]

    return names(publish), names(subscribe)


def test_the_documented_announce_permissions_let_a_worker_announce_for_its_own_consumer_only(tmp_path):
    """The collector, a worker of ORDERS/worker and another user, each with the permissions
    docs/security.md gives them: the worker's pin and pull-settings announcements reach the
    collector and are stored verified; the server refuses the worker announcing for another
    consumer and the other user announcing for the worker's, so neither is stored."""
    import asyncio

    import nats

    from jetwatch.core.embedded_server import free_port
    from jetwatch.core.jsapi import JetStreamAPI
    from jetwatch.core.pin_announce import PinAnnouncer
    from jetwatch.core.pin_announce import announce_subject as pin_subject
    from jetwatch.core.pull_announce import PullAnnouncer, PullSettings
    from jetwatch.core.pull_announce import announce_subject as pull_subject
    from jetwatch.demo.workers import PullWorker
    from tests.helpers import eventually, make_consumer, make_stream, publish

    doc = (Path(__file__).resolve().parents[1] / "docs" / "security.md").read_text()
    collector_pub, collector_sub = _permissions(doc, "Collector (read-only apart from its own durable")
    worker_pub, worker_sub = _permissions(doc, "Worker of `ORDERS/worker`")
    others = doc.split("Every other user of the account", 1)[1].split("```", 2)[1].strip()
    assert others.startswith("permissions:") and "jetwatch.pin.announce.>" in others
    conf = tmp_path / "announce.conf"
    conf.write_text("authorization { users: [\n"
                    "  { user: admin, password: admin-pw }\n"
                    f"  {{ user: watcher, password: watcher-pw, permissions: {{ publish: {json.dumps(collector_pub)}, "
                    f"subscribe: {json.dumps(collector_sub)} }} }}\n"
                    f"  {{ user: orders-worker, password: worker-pw, permissions: {{ publish: {json.dumps(worker_pub)}, "
                    f"subscribe: {json.dumps(worker_sub)} }} }}\n"
                    f"  {{ user: other, password: other-pw, {others} }}\n]}}\n")
    server = NatsServer(store_dir=tmp_path / "js", monitor_port=free_port(), extra_args=["-c", str(conf)]).start()
    db = str(tmp_path / "a.duckdb")
    store = Store(db)
    holders = "SELECT consumer, name, verification FROM pin_holders ORDER BY ALL"
    pulls = "SELECT consumer, name, verification FROM pull_settings ORDER BY ALL"
    try:
        admin_args = ["--server", server.url, "--user", "admin", "--password", "admin-pw"]
        done = subprocess.run([sys.executable, "-m", "jetwatch.cli", "setup", *admin_args], capture_output=True,
                              text=True, timeout=60, env=clean_env())
        assert done.returncode == 0, done.stderr
        proc = _collect(["--server", server.url, "--user", "watcher", "--monitor-url", str(server.monitor_url)],
                        clean_env(JETWATCH_PASSWORD="watcher-pw"), db)

        async def scenario() -> tuple[list[str], list[str]]:
            refused: dict[str, list[str]] = {"worker": [], "other": []}

            def noted(who: str):
                async def error(exc: Exception) -> None:
                    refused[who].append(str(exc))
                return error

            admin = await nats.connect(server.url, user="admin", password="admin-pw")
            api = JetStreamAPI(admin)
            await make_stream(api, "ORDERS", ["orders.>"])
            for consumer in ("worker", "other"):
                await make_consumer(api, "ORDERS", consumer, "pinned_client", timeout_s=30)
            nc = await nats.connect(server.url, user="orders-worker", password="worker-pw", name="worker-a",
                                    error_cb=noted("worker"))
            mallory = await nats.connect(server.url, user="other", password="other-pw", name="mallory",
                                         error_cb=noted("other"))
            worker = PullWorker(nc, "ORDERS", "worker", group="jobs", name="worker-a",
                                announcer=PinAnnouncer(nc, "ORDERS", "worker", group="jobs"),
                                pull_announcer=PullAnnouncer(nc, "ORDERS", "worker", policy="pinned_client"))
            try:
                # Announcements are read with a plain subscription: the worker starts once it is open.
                await eventually(lambda: store.exists() and rows(store, "SELECT capture_mode FROM collector_status")
                                 == [("durable",)], message="the collector's first cycle, capturing durably")
                worker.start()
                await publish(admin, "orders.x", 3)
                await eventually(lambda: worker.pin_id, message="the worker pinned")
                await eventually(lambda: rows(store, holders) == [("worker", "worker-a", "verified")]
                                 and rows(store, pulls) == [("worker", "worker-a", "verified")],
                                 message="the worker's announcements stored, verified")
                # The worker for another consumer, the other user for the worker's: the server refuses both.
                theirs = PinAnnouncer(nc, "ORDERS", "other", group="jobs").announcement(worker.pin_id or "")
                await nc.publish(pin_subject("ORDERS", "other"), theirs.encode())
                claim = PullAnnouncer(mallory, "ORDERS", "worker").announcement(PullSettings(group="jobs", expires_ns=0))
                await mallory.publish(pull_subject("ORDERS", "worker"), claim.encode())
                await mallory.publish(pin_subject("ORDERS", "worker"),
                                      PinAnnouncer(mallory, "ORDERS", "worker").announcement("MALLORY0000000000001").encode())
                await eventually(lambda: len(refused["worker"]) >= 1 and len(refused["other"]) >= 2,
                                 message="the server refused each announcement outside its user's rights")
                # A marker from the worker: the server handles its messages in order.
                marker = PinAnnouncer(nc, "ORDERS", "worker", group="jobs").announcement("WORKERMARKER00000001")
                await nc.publish(pin_subject("ORDERS", "worker"), marker.encode())
                await eventually(lambda: rows(store, "SELECT count(*) FROM pin_holders WHERE pin_id = ?",
                                              ["WORKERMARKER00000001"]) == [(1,)], message="the worker's marker stored")
                return refused["worker"], refused["other"]
            finally:
                await worker.stop()
                for c in (nc, mallory, admin):
                    await c.close()

        try:
            by_worker, by_other = asyncio.run(scenario())
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        assert all("permissions violation for publish" in e.lower() for e in by_worker + by_other), by_worker + by_other
        assert rows(store, holders) == [("worker", "worker-a", "verified")] * 2
        assert rows(store, pulls) == [("worker", "worker-a", "verified")]
        assert proc.returncode == 0, err[-3000:]
        assert "Permissions Violation" not in err, err[-3000:]
    finally:
        server.stop()
