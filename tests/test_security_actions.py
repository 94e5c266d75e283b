"""Actions, secrets and the audit log, tried as an attacker and a tired operator would: against a
real nats-server with two accounts (APP and OTHER) that each hold a stream A with a consumer wa."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import nats
import pytest

from jetwatch.core.embedded_server import NatsServer
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.dashboard import identities
from jetwatch.dashboard.ui import WORD_JOINER
from jetwatch.store.database import Store
from tests.helpers import (
    OPERATOR_PASSWORD,
    clean_env,
    make_consumer,
    make_stream,
    one_consumer_stream,
    operators_file,
    rows,
    wait_until,
)

ACCOUNTS_CONF = """
accounts {
  APP { jetstream: enabled, users: [ {user: app, password: app-pw}, {user: plain, password: plain-pw},
                                      {user: noinfo, password: noinfo-pw,
                                       permissions: {publish: {deny: ["$SYS.REQ.USER.INFO"]}}} ] }
  OTHER { jetstream: enabled, users: [ {user: other, password: other-pw} ] }
  SYS { users: [ {user: sys, password: sys-pw} ] }
}
system_account: SYS
"""


def accounts_server(base: Path) -> NatsServer:
    """A server with accounts APP and OTHER; each has stream A with consumer wa."""
    conf = base / "accounts.conf"
    conf.write_text(ACCOUNTS_CONF)
    server = NatsServer(store_dir=base / "js", extra_args=["-c", str(conf)]).start()

    async def setup() -> None:
        for user, password in (("app", "app-pw"), ("other", "other-pw")):
            nc = await nats.connect(server.url, user=user, password=password)
            api = JetStreamAPI(nc)
            await make_stream(api, "A", ["a.>"])
            await make_consumer(api, "A", "wa")
            await nc.close()

    asyncio.run(setup())
    return server


@pytest.fixture(scope="module")
def two_accounts(tmp_path_factory):
    server = accounts_server(tmp_path_factory.mktemp("accounts"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def second_cluster(tmp_path_factory):
    """Another server like `two_accounts`: the same accounts, streams and consumer names."""
    server = accounts_server(tmp_path_factory.mktemp("accounts-us"))
    yield server
    server.stop()


def paused(url: str, user: str, password: str, stream: str = "A", consumer: str = "wa") -> bool:
    async def read() -> bool:
        nc = await nats.connect(url, user=user, password=password)
        try:
            return bool((await JetStreamAPI(nc).consumer_info(stream, consumer)).get("paused"))
        finally:
            await nc.close()

    return asyncio.run(read())


def resume_all(url: str) -> None:
    async def resume() -> None:
        for user, password in (("app", "app-pw"), ("other", "other-pw")):
            nc = await nats.connect(url, user=user, password=password)
            await JetStreamAPI(nc).pause("A", "wa", None)
            await nc.close()

    asyncio.run(resume())


def jetwatch(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jetwatch.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env or clean_env(), stdin=subprocess.DEVNULL)


def context(tmp_path: Path, name: str, url: str, user: str, password: str) -> dict[str, str]:
    """A `nats` CLI context file, and the environment that makes jetwatch find it."""
    ctx = tmp_path / "cfg" / "nats" / "context"
    ctx.mkdir(parents=True, exist_ok=True)
    (ctx / f"{name}.json").write_text(json.dumps({"url": url, "user": user, "password": password}))
    return clean_env(XDG_CONFIG_HOME=str(tmp_path / "cfg"))


# 1. Account-correct actions ------------------------------------------------------------------

def test_an_action_on_another_accounts_consumer_without_a_mapping_is_refused_before_anything_is_sent(
        two_accounts, tmp_path):
    db = str(tmp_path / "a.duckdb")
    done = jetwatch("pause", "A", "wa", "--account", "OTHER", "--until", "10m", "--yes", "--db", db,
                    "--server", two_accounts.url, "--user", "app", "--password", "app-pw")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "not sent: A/wa is in account OTHER, but jetwatch's connection is authenticated for account APP" \
        in done.stdout
    assert "--account-contexts OTHER=<context>" in done.stdout
    assert not paused(two_accounts.url, "app", "app-pw") and not paused(two_accounts.url, "other", "other-pw")
    audit = rows(Store(db), "SELECT phase, account, outcome FROM audit ORDER BY seq")
    assert audit == [("intent", "OTHER", "pending"), ("outcome", "OTHER", "refused")]


def test_an_action_on_a_mapped_account_changes_that_accounts_consumer_and_not_its_namesake(two_accounts, tmp_path):
    db = str(tmp_path / "m.duckdb")
    env = context(tmp_path, "other-ops", two_accounts.url, "other", "other-pw")
    try:
        done = jetwatch("pause", "A", "wa", "--account", "OTHER", "--until", "10m", "--yes", "--db", db,
                        "--server", two_accounts.url, "--user", "app", "--password", "app-pw",
                        "--account-contexts", "OTHER=other-ops", env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert paused(two_accounts.url, "other", "other-pw")
        assert not paused(two_accounts.url, "app", "app-pw")
        audit = rows(Store(db), "SELECT phase, account, outcome, reply FROM audit ORDER BY seq")
        assert [a[:3] for a in audit] == [("intent", "OTHER", "pending"), ("outcome", "OTHER", "ok")]
        assert json.loads(audit[1][3])["paused"] is True  # the server's reply, as it came

        # A mapping that, wrongly, authenticates for APP: refused, the OTHER consumer stays paused.
        ctx = context(tmp_path, "app-ops", two_accounts.url, "app", "app-pw")
        done = jetwatch("resume", "A", "wa", "--account", "OTHER", "--yes", "--db", db, "--server",
                        two_accounts.url, "--user", "app", "--password", "app-pw",
                        "--account-contexts", "OTHER=app-ops", env=ctx)
        assert done.returncode == 1
        assert "its mapping in --account-contexts authenticates for account APP" in done.stdout
        assert paused(two_accounts.url, "other", "other-pw")
    finally:
        resume_all(two_accounts.url)


def test_an_action_without_an_account_records_the_account_it_acted_on(two_accounts, tmp_path):
    db = str(tmp_path / "n.duckdb")
    try:
        done = jetwatch("pause", "A", "wa", "--until", "10m", "--yes", "--db", db, "--server", two_accounts.url,
                        "--user", "other", "--password", "other-pw")
        assert done.returncode == 0, done.stdout + done.stderr
        assert rows(Store(db), "SELECT account FROM audit WHERE phase = 'outcome'") == [("OTHER",)]
        assert paused(two_accounts.url, "other", "other-pw") and not paused(two_accounts.url, "app", "app-pw")
    finally:
        resume_all(two_accounts.url)


def test_an_action_on_a_connection_whose_account_the_server_does_not_say_is_refused_never_done_as_G(
        two_accounts, tmp_path):
    """A user denied `$SYS.REQ.USER.INFO`: jetwatch cannot learn which account it acts in. It used to
    take `$G` for the answer, then pause APP's A/wa and audit it as `$G`'s. Now nothing is sent,
    whatever the target says, and the refusal is audited and says what to allow."""
    db = str(tmp_path / "g.duckdb")
    login = ("--server", two_accounts.url, "--user", "noinfo", "--password", "noinfo-pw")
    try:
        for account in ((), ("--account", "$G"), ("--account", "APP")):
            done = jetwatch("pause", "A", "wa", *account, "--until", "10m", "--yes", "--db", db, *login)
            assert done.returncode == 1, done.stdout + done.stderr
            said = done.stdout + done.stderr
            assert "not sent: jetwatch cannot check that it would act on A/wa" in said, said
            assert "$SYS.REQ.USER.INFO: no reply within 2s" in said and "Allow the user to publish" in said, said
            assert "Traceback" not in said
            assert not paused(two_accounts.url, "app", "app-pw")
        outcomes = rows(Store(db), "SELECT account, outcome FROM audit WHERE phase = 'outcome' ORDER BY seq")
        assert outcomes == [(None, "refused"), ("$G", "refused"), ("APP", "refused")], outcomes
    finally:
        resume_all(two_accounts.url)


def test_a_collector_whose_account_the_server_does_not_say_samples_nothing_and_says_why(two_accounts, tmp_path, run):
    """It used to file APP's consumers under `$G` (and its advisories under the account each one
    claimed): now it files nothing under a guessed account, its status says why and what to allow,
    and it asks again every interval."""
    from tests.helpers import collector_settings, eventually, running

    db = str(tmp_path / "c.duckdb")
    store = Store(db)

    async def scenario() -> None:
        settings = collector_settings(two_accounts.url, db, ("A",), user="noinfo", password="noinfo-pw",
                                      interval=0.5)
        async with running(settings) as (collector, _):
            status = await eventually(lambda: store.exists() and rows(store, "SELECT last_error FROM collector_status"),
                                      timeout=30, message="a status row saying why nothing is sampled")
            first = collector.last_error[1]
            await eventually(lambda: collector.last_error[1] > first, timeout=30, message="asked again")
            assert collector.cycles == 0
        error = status[0][0]
        assert error.startswith("nothing is sampled: the server did not say which account this connection is in "
                                "($SYS.REQ.USER.INFO: no reply within 2s)"), error
        assert "Allow the user to publish $SYS.REQ.USER.INFO" in error

    run(scenario())
    assert rows(store, "SELECT count(*) FROM samples") == [(0,)]
    assert rows(store, "SELECT count(*) FROM consumer_current") == [(0,)]


def test_the_dashboard_pause_of_other_a_wa_pauses_other_a_wa_or_nothing(two_accounts, tmp_path, monkeypatch):
    """The finding as reported: the Fleet (sampling every account through the system account)
    offered OTHER/A/wa, and its Pause paused APP/A/wa. Now: refused without a mapping, and with
    one the right consumer pauses while its namesake in APP does not."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from tests.test_dashboard import APP

    db = str(tmp_path / "d.duckdb")
    env = context(tmp_path, "sys", two_accounts.url, "sys", "sys-pw")
    context(tmp_path, "other-ops", two_accounts.url, "other", "other-pw")
    collector = subprocess.Popen([sys.executable, "-m", "jetwatch.cli", "collect", "--db", db, "--interval", "0.3s",
                                  "--server", two_accounts.url, "--user", "app", "--password", "app-pw",
                                  "--system-context", "sys"], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
    store = Store(db)
    try:
        wait_until(lambda: store.exists() and ("OTHER",) in rows(store, "SELECT account FROM consumer_latest"),
                   timeout=30, message="OTHER's consumers sampled")
    finally:
        collector.send_signal(signal.SIGTERM)
        collector.wait(30)
    for k in [k for k in os.environ if k.startswith("JETWATCH_")]:
        monkeypatch.delenv(k)
    for k, v in {"JETWATCH_DB": db, "JETWATCH_SERVER": two_accounts.url, "JETWATCH_USER": "app",
                 "JETWATCH_PASSWORD": "app-pw", "JETWATCH_OPERATORS_FILE": operators_file(tmp_path, "ana"),
                 "XDG_CONFIG_HOME": env["XDG_CONFIG_HOME"]}.items():
        monkeypatch.setenv(k, v)

    def pause_other() -> str:
        st.cache_data.clear()
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params["account"], at.query_params["stream"], at.query_params["consumer"] = "OTHER", "A", "wa"
        at.run()
        at.switch_page("views/consumer.py").run()
        at.text_input(key="op_name").input("ana")
        at.text_input(key="op_secret").input(OPERATOR_PASSWORD)
        at.button(key="op_enable").click().run()
        at.button(key="action_pause").click().run()
        assert any("account OTHER, stream A, consumer wa" in m.value for m in at.markdown)
        at.button(key="action_confirm").click().run()
        assert not at.exception, [e.message for e in at.exception]
        return at.session_state["action_result"].message

    try:
        said = pause_other()
        assert said.startswith("not sent: A/wa is in account OTHER, but jetwatch's connection is authenticated "
                               "for account APP")
        assert not paused(two_accounts.url, "app", "app-pw") and not paused(two_accounts.url, "other", "other-pw")

        monkeypatch.setenv("JETWATCH_ACCOUNT_CONTEXTS", "OTHER=other-ops")
        said = pause_other()
        assert said.startswith("paused until"), said
        assert paused(two_accounts.url, "other", "other-pw") and not paused(two_accounts.url, "app", "app-pw")
        outcomes = rows(store, "SELECT account, outcome FROM audit WHERE phase = 'outcome' ORDER BY seq")
        assert outcomes == [("OTHER", "refused"), ("OTHER", "ok")]
    finally:
        resume_all(two_accounts.url)


def _cluster_store(server: NatsServer, cluster: str, db: Path) -> None:
    """A store of `cluster` as its own collector writes it (APP's consumers, the server it reported)."""
    collector = subprocess.Popen([sys.executable, "-m", "jetwatch.cli", "collect", "--server", server.url,
                                  "--user", "app", "--password", "app-pw", "--db", str(db), "--cluster", cluster,
                                  "--interval", "0.3s", "--include-streams", "A"], env=clean_env(),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = Store(db)

    def sampled() -> bool:
        try:
            return store.exists() and bool(rows(store, "SELECT * FROM consumer_latest WHERE account = 'APP'")) \
                and bool(rows(store, "SELECT * FROM collector_status WHERE server_url IS NOT NULL"))
        except Exception:  # held by the collector this instant
            return False

    try:
        wait_until(sampled, timeout=60, message=f"cluster {cluster}'s A/wa sampled")
    finally:
        collector.send_signal(signal.SIGTERM)
        collector.wait(30)


def test_a_dashboard_action_with_account_contexts_reaches_the_cluster_its_dialog_names(
        two_accounts, second_cluster, tmp_path, monkeypatch):
    """Two clusters (eu, us) with the same accounts and names; the dashboard connects to eu and maps
    APP to a context. Pause on us's APP/A/wa: us's consumer is paused, eu's is not, and the audit
    rows go into us's store. The CLI, told --server us, goes to us even when the context names eu."""
    from tests.test_dashboard import run_app

    eu, us = two_accounts, second_cluster
    stores_dir = tmp_path / "stores"
    stores_dir.mkdir()
    for server, cluster in ((eu, "eu"), (us, "us")):
        _cluster_store(server, cluster, stores_dir / f"{cluster}.duckdb")
    env = context(tmp_path, "app-eu", eu.url, "app", "app-pw")
    ctx_file = tmp_path / "cfg" / "nats" / "context" / "app-ops.json"
    ctx_file.write_text(json.dumps({"user": "app", "password": "app-pw"}))  # credentials only
    for k in [k for k in os.environ if k.startswith("JETWATCH_")]:
        monkeypatch.delenv(k)
    for k, v in {"JETWATCH_DBS": str(stores_dir), "JETWATCH_SERVER": eu.url, "JETWATCH_USER": "plain",
                 "JETWATCH_PASSWORD": "plain-pw", "JETWATCH_ACCOUNT_CONTEXTS": "APP=app-ops",
                 "JETWATCH_OPERATORS_FILE": operators_file(tmp_path, "ana"), "JETWATCH_STALE_AFTER": "1h",
                 "JETWATCH_DATA_DIR": str(tmp_path), "XDG_CONFIG_HOME": env["XDG_CONFIG_HOME"]}.items():
        monkeypatch.setenv(k, v)
    import streamlit as st

    st.cache_data.clear()
    try:
        at = run_app("views/consumer.py", cluster="us", account="APP", stream="A", consumer="wa")
        at.text_input(key="op_name").input("ana")
        at.text_input(key="op_secret").input(OPERATOR_PASSWORD)
        at.button(key="op_enable").click().run()
        at.button(key="action_pause").click().run()
        shown = [c.value.replace("\\", "") for c in at.caption]
        assert any("cluster us" in c and us.url.split("//")[1] in c for c in shown), shown
        at.button(key="action_confirm").click().run()
        assert not at.exception, [e.message for e in at.exception]
        result = at.session_state["action_result"]
        assert result.ok, result.message
        assert paused(us.url, "app", "app-pw"), "us's A/wa, named by the dialog, is not paused"
        assert not paused(eu.url, "app", "app-pw"), "eu's A/wa was paused by an action on cluster us"
        audited = "SELECT account, action, outcome FROM audit WHERE phase = 'outcome'"
        assert rows(Store(stores_dir / "us.duckdb"), audited) == [("APP", "pause", "ok")]
        assert rows(Store(stores_dir / "eu.duckdb"), "SELECT * FROM audit") == []
        resume_all(us.url)

        done = jetwatch("pause", "A", "wa", "--account", "APP", "--until", "10m", "--yes", "--no-audit",
                        "--server", us.url, "--account-contexts", "APP=app-eu", env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert paused(us.url, "app", "app-pw") and not paused(eu.url, "app", "app-pw")
    finally:
        resume_all(us.url)
        resume_all(eu.url)


# 4. Every action audited exactly once, whatever happens ---------------------------------------

AUDIT = "SELECT action_id, phase, outcome, actor, stream FROM audit ORDER BY seq"


def two_rows_per_action(store: Store) -> list[tuple[str, str, str]]:
    """(phase, outcome, stream) per row, after checking each action id has exactly an intent and an outcome."""
    found = rows(store, AUDIT)
    by_id: dict[str, list[str]] = {}
    for action_id, phase, *_ in found:
        by_id.setdefault(action_id, []).append(phase)
    assert all(p == ["intent", "outcome"] for p in by_id.values()), found
    return [(phase, outcome, stream) for _, phase, outcome, _, stream in found]


async def _held_work(url: str, stream: str, consumer: str, subject: str, n: int = 2):
    """A consumer with `n` messages held in flight by a worker that does not ack (until told)."""
    from jetwatch.demo.workers import PullWorker
    from tests.helpers import eventually, publish

    nc = await nats.connect(url)
    api = JetStreamAPI(nc)
    await make_stream(api, stream, [subject])
    await make_consumer(api, stream, consumer, ack_wait=60 * 10**9)
    w = PullWorker(nc, stream, consumer, name="holder", batch=5)
    w.acking = False
    w.start()
    await publish(nc, subject, n)
    await eventually(lambda: w.stats.received == n, message="work in flight")
    return nc, api, w


async def _cli_drain_holding_two(url: str, db_path: str, stream: str, *extra: str
                                 ) -> tuple[asyncio.subprocess.Process, bytes]:
    """`jetwatch drain` of stream/c (with `extra` flags) as a child process, returned once it
    reports both held messages in flight (the drain is under way and waiting on them), with what it
    printed so far."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jetwatch.cli", "drain", stream, "c", "--timeout", "60s", "--yes", "--db", db_path,
        "--server", url, *extra, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=clean_env())
    seen = b""
    while b"draining: 2 of 2 in flight" not in seen:
        chunk = await asyncio.wait_for(proc.stdout.read(200), 120)
        assert chunk, seen
        seen += chunk
    return proc, seen


def test_a_ctrl_c_of_a_cli_drain_is_audited_as_interrupted(nats_server, db_path, uid, run):
    stream = f"{uid}_INT"

    async def scenario() -> None:
        nc, api, w = await _held_work(nats_server.url, stream, "c", f"{uid}.int")
        proc, seen = await _cli_drain_holding_two(nats_server.url, db_path, stream)
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 130
        await api.pause(stream, "c", None)
        await w.stop()
        await nc.close()

    run(scenario())
    assert two_rows_per_action(Store(db_path)) == [("intent", "pending", stream), ("outcome", "interrupted", stream)]


def _drain_pid(drain_id: str) -> int | None:
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if drain_id.encode() in (proc / "cmdline").read_bytes():
                    return int(proc.name)
            except OSError:
                continue
    return None


def _gone(pid: int) -> bool:
    """The process has exited (a zombie of its own session's reaper counts as exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def test_sigterm_of_a_detached_drain_is_audited_and_its_names_never_reach_argv(nats_server, db_path, uid, run, tmp_path):
    """The dashboard's drain of stream `-orders` by operator `-ops-bob`: the intent is audited
    before the process starts, the process reads its target from the store, and a SIGTERM
    mid-drain ends in an `interrupted` outcome row and drain state."""
    from jetwatch.actions.drains import spawn_detached
    from jetwatch.actions.operations import DrainPlan, Target
    from jetwatch.core.settings import Settings

    stream = f"-orders{uid}"
    store = Store(db_path)
    settings = Settings({"server": nats_server.url, "db": db_path})

    async def scenario() -> None:
        nc, api, w = await _held_work(nats_server.url, stream, "c", f"{uid}.orders")
        drain_id = spawn_detached(settings, store, Target(None, stream, "c"), DrainPlan("resume", 60.0), "-ops-bob",
                                  tmp_path / "logs")
        drains = "SELECT state, actor, stream FROM drains"
        wait_until(lambda: rows(store, drains) == [("draining", "-ops-bob", stream)], timeout=30,
                   message="the detached drain draining")
        pid = _drain_pid(drain_id)
        assert pid is not None
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        assert b"ops-bob" not in cmdline and stream.encode() not in cmdline
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: rows(store, drains)[0][0] == "interrupted", timeout=30, message="drain interrupted")
        wait_until(lambda: _gone(pid), timeout=30, message="the drain process exited")
        await api.pause(stream, "c", None)
        await w.stop()
        await nc.close()

    run(scenario())
    assert two_rows_per_action(store) == [("intent", "pending", stream), ("outcome", "interrupted", stream)]
    assert {r[3] for r in rows(store, AUDIT)} == {"-ops-bob"}


def test_a_detached_drain_of_a_dash_named_stream_runs_to_the_end(nats_server, db_path, uid, run, tmp_path):
    from jetwatch.actions.drains import spawn_detached
    from jetwatch.actions.operations import DrainPlan, Target
    from jetwatch.core.settings import Settings

    stream = f"-dash{uid}"
    store = Store(db_path)

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.dash"])
        await make_consumer(api, stream, "-c")
        await nc.close()

    run(scenario())
    spawn_detached(Settings({"server": nats_server.url, "db": db_path}), store, Target(None, stream, "-c"),
                   DrainPlan("resume", 10.0), "-ops-bob", tmp_path / "logs")
    wait_until(lambda: rows(store, "SELECT state FROM drains") == [("done",)], timeout=30, message="drain done")
    assert two_rows_per_action(store) == [("intent", "pending", stream), ("outcome", "ok", stream)]


def test_a_pause_the_server_did_not_make_is_audited_as_failed(nats_server, db_path, uid, run):
    stream = f"{uid}_PAST"
    run(one_consumer_stream(nats_server.url, stream, f"{uid}.past"))
    done = jetwatch("pause", stream, "c", "--until", "2020-01-01T00:00:00Z", "--yes", "--db", db_path,
                    "--server", nats_server.url)
    assert done.returncode == 1
    assert "the server did not pause it: it replied paused: false" in done.stdout
    assert two_rows_per_action(Store(db_path)) == [("intent", "pending", stream), ("outcome", "failed", stream)]
    reply = rows(Store(db_path), "SELECT reply FROM audit WHERE phase = 'outcome'")[0][0]
    assert json.loads(reply)["paused"] is False


def test_a_drain_whose_final_pause_the_server_refused_is_audited_as_failed(nats_server, db_path, uid, run):
    """`--then stay-paused` until a time that passes while work is still in flight: the last pause
    is answered `paused: false`. Judged as a plain `pause` is: failed, said, exit 1."""
    from jetwatch.actions.operations import utcnow
    from tests.helpers import eventually

    stream = f"{uid}_STAY"

    async def scenario() -> str:
        nc, api, w = await _held_work(nats_server.url, stream, "c", f"{uid}.stay")
        # A duration, which the drain reads as from its own start: a time fixed before it starts was
        # already past when the drain checked it on a busy machine (its start alone can take seconds).
        # How long after its start is set by how long a loaded start takes to reach the check, not by
        # what is tested; the time it resolved to is the one its audit intent records.
        proc, seen = await _cli_drain_holding_two(nats_server.url, db_path, stream, "--then", "stay-paused",
                                                  "--stay-until", "8s")
        [(params,)] = rows(Store(db_path), "SELECT parameters FROM audit WHERE phase = 'intent'")
        stay_until = dt.datetime.fromisoformat(json.loads(params)["stay_until"])
        await eventually(lambda: utcnow() > stay_until + dt.timedelta(seconds=0.5), timeout=30,
                         message="the stay-until time passed mid-drain")
        await w.ack_held()
        rest, _ = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 1, (seen + rest).decode()
        assert not (await api.consumer_info(stream, "c")).get("paused")
        await w.stop()
        await nc.close()
        return (seen + rest).decode()

    said = run(scenario())
    assert "drained, but the server did not pause it again: it replied paused: false" in said, said
    assert "paused until" not in said.replace("did not pause it again", "")
    assert two_rows_per_action(Store(db_path)) == [("intent", "pending", stream), ("outcome", "failed", stream)]


def test_without_an_audit_store_an_action_is_refused_unless_no_audit_is_given(nats_server, uid, run, tmp_path):
    stream = f"{uid}_NOSTORE"

    async def make() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.nostore"])
        await make_consumer(api, stream, "c")
        await nc.close()

    run(make())
    env = clean_env()
    args = ["pause", stream, "c", "--until", "10m", "--yes", "--server", nats_server.url]
    done = subprocess.run([sys.executable, "-m", "jetwatch.cli", *args], capture_output=True, text=True,
                          timeout=60, env=env, cwd=tmp_path)  # no --db, and no store at the default path
    assert done.returncode == 2
    assert "not sent: no audit store at jetwatch-data/jetwatch.duckdb" in done.stderr
    assert not paused_default(nats_server.url, stream)
    done = subprocess.run([sys.executable, "-m", "jetwatch.cli", *args, "--no-audit"], capture_output=True,
                          text=True, timeout=60, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert paused_default(nats_server.url, stream)
    assert not (tmp_path / "jetwatch-data").exists()


def paused_default(url: str, stream: str) -> bool:
    async def read() -> bool:
        nc = await nats.connect(url)
        try:
            return bool((await JetStreamAPI(nc).consumer_info(stream, "c")).get("paused"))
        finally:
            await nc.close()

    return asyncio.run(read())


def test_an_audit_row_that_cannot_be_written_after_sending_is_said_in_words(nats_server, db_path, uid, run):
    """The store changes under a running drain so the outcome insert fails (a Binder error in
    DuckDB): the user is told the action happened and was not audited; no traceback."""
    stream = f"{uid}_BIND"
    store = Store(db_path)

    async def scenario() -> str:
        nc, api, w = await _held_work(nats_server.url, stream, "c", f"{uid}.bind")
        proc, seen = await _cli_drain_holding_two(nats_server.url, db_path, stream)
        store.write(lambda con: con.execute("ALTER TABLE audit DROP COLUMN row_hash"))
        await w.ack_held()
        rest, _ = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 1
        await w.stop()
        await nc.close()
        return (seen + rest).decode()

    text = run(scenario())
    assert "drained and resumed (the action was sent and its result stands, but its audit row could not be " \
           "written" in text
    assert "Traceback" not in text and "BinderException" not in text


# The audit log is tamper-evident ---------------------------------------------------------------

def _audited_actions(nats_server, db_path: str, uid: str, run) -> None:
    """A real pause and resume, audited through the same begin/finish path the CLI uses."""
    from jetwatch.actions import operations as ops
    from jetwatch.actions.audit import begin, finish

    stream = f"{uid}_CHAIN"
    store = Store(db_path)

    async def act() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.chain"])
        await make_consumer(api, stream, "c")
        target = ops.Target("$G", stream, "c")
        until = ops.utcnow() + dt.timedelta(minutes=10)
        for name, call, params in (("pause", lambda: ops.pause(api, target, until), {"until": until}),
                                   ("resume", lambda: ops.resume(api, target), {})):
            action_id = begin(store, name, target, "ana", "cli", params)
            finish(store, action_id, await call(), "ana", "cli", params)
        await nc.close()

    run(act())


def verify(db_path: str, capsys) -> tuple[int, str]:
    from jetwatch.cli import main

    code = main(["audit", "verify", "--db", db_path])
    return code, capsys.readouterr().out


def test_audit_verify_passes_an_untouched_chain_and_says_where_an_edited_or_removed_row_breaks_it(
        nats_server, db_path, uid, run, capsys):
    _audited_actions(nats_server, db_path, uid, run)
    store = Store(db_path)
    assert rows(store, "SELECT count(*) FROM audit") == [(4,)]
    code, out = verify(db_path, capsys)
    assert code == 0, out
    assert "audit chain intact: 4 rows" in out

    store.write(lambda con: con.execute("UPDATE audit SET actor = 'somebody-else' WHERE seq = 4"))
    code, out = verify(db_path, capsys)
    assert code == 1
    assert "BROKEN: row 4 (resume" in out and "was changed after it was written" in out

    store.write(lambda con: con.execute("DELETE FROM audit WHERE seq = 2"))
    code, out = verify(db_path, capsys)
    assert code == 1
    assert "rows 2..2 are missing before row 3" in out
    assert "row 3 (resume" in out and "does not follow the row before it" in out


def test_a_row_inserted_outside_the_chain_is_a_break_and_a_kept_head_catches_a_cut_off_end(
        nats_server, db_path, uid, run, capsys, monkeypatch):
    """Only rows written before the store had a chain may lack a chain position: an INSERT with
    `seq` NULL now is a break, named by `audit verify` and never shown as an action on the Audit
    page. Deleting the last row leaves a shorter valid chain: the head printed to keep, given back
    with --head, catches it."""
    from jetwatch.cli import main
    from tests.test_dashboard import frame, run_app

    _audited_actions(nats_server, db_path, uid, run)
    store = Store(db_path)
    code, out = verify(db_path, capsys)
    assert code == 0, out
    kept = out.split("head to keep: ", 1)[1].split()[0]
    [(last_hash,)] = rows(store, "SELECT row_hash FROM audit WHERE seq = 4")
    assert kept.endswith(last_hash)

    store.write(lambda con: con.execute(
        "INSERT INTO audit (ts, actor, origin, action, account, stream, consumer, parameters, outcome, reply) "
        "VALUES (now(), 'ana', 'dashboard', 'unpin', 'APP', 'A', 'wa', '{}', 'ok', '{}')"))
    code, out = verify(db_path, capsys)
    assert code == 1, out
    assert "BROKEN: a row without a chain position was written after the chain began (unpin A/wa by ana" in out

    for k in [k for k in os.environ if k.startswith("JETWATCH_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("JETWATCH_DB", db_path)
    import streamlit as st

    st.cache_data.clear()
    at = run_app("views/audit.py")
    summaries = list(frame(at, "Summary")["Summary"])
    assert not any("ana unpinned A / wa" in x for x in summaries), summaries
    assert any("outside the audit chain" in w.value for w in at.warning), [w.value for w in at.warning]

    store.write(lambda con: con.execute("DELETE FROM audit WHERE seq IS NULL OR seq = 4"))
    code, out = verify(db_path, capsys)
    assert code == 0, out  # a shorter chain is a valid chain ...
    assert main(["audit", "verify", "--db", db_path, "--head", kept]) == 1  # ... but not the one kept
    out = capsys.readouterr().out
    assert "BROKEN: the head kept (" in out and "is not in the chain" in out, out
    [(now_head,)] = rows(store, "SELECT row_hash FROM audit WHERE seq = 3")
    assert main(["audit", "verify", "--db", db_path, "--head", now_head]) == 0


# 2. Secrets never leave their setting ----------------------------------------------------------

PASSWORD = "pw-Zq8rXy41-recognisable"
OP_SECRET = "opsecret-K7mN2-recognisable"


def _descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, parent in parents.items() if parent == p]
        found += kids
        frontier += kids
    return found


def _proc(pid: int, what: str) -> bytes:
    try:
        return (Path(f"/proc/{pid}") / what).read_bytes()
    except OSError:
        return b""


def _store_text(store: Store) -> str:
    def dump(con) -> str:
        tables = [t for (t,) in con.execute("SELECT table_name FROM information_schema.tables "
                                             "WHERE table_type = 'BASE TABLE'").fetchall()]
        return "\n".join(str(con.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables)

    return store.read(dump)


def _page_text(at) -> str:
    from tests.test_dashboard import texts

    parts = [texts(at)] + [e.value for e in at.error] + [s.value for s in at.success]
    parts += [d.value.to_csv() if hasattr(d.value, "to_csv") else str(d.value) for d in at.dataframe]
    return "\n".join(parts)


@pytest.fixture(scope="module")
def secret_server(tmp_path_factory):
    server = NatsServer(store_dir=tmp_path_factory.mktemp("secret") / "js",
                        extra_args=["--user", "jw", "--pass", PASSWORD]).start()
    yield server
    server.stop()


def test_up_and_its_children_keep_the_password_and_operator_secret_out_of_argv_logs_store_and_pages(
        secret_server, tmp_path, monkeypatch):
    """`up` given a server URL with user:password@ and an operator secret: the children get only
    the secrets they need, in their environment; nothing of either shows in any command line,
    log, the store or the dashboard's pages."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from jetwatch.core.embedded_server import free_port
    from tests.test_dashboard import APP

    port = secret_server.port
    data = tmp_path / "data"
    operators = str(tmp_path / "operators")
    identities.add(operators, "ana", OP_SECRET)  # the operator's password: recognisable, never to be seen
    env = clean_env(JETWATCH_SERVER=f"nats://jw:{PASSWORD}@127.0.0.1:{port}", JETWATCH_OPERATOR_SECRET=OP_SECRET,
                    JETWATCH_OPERATORS_FILE=operators)
    proc = subprocess.Popen([sys.executable, "-m", "jetwatch.cli", "up", "--demo", "--no-pipeline", "--data-dir",
                             str(data), "--port", str(free_port()), "--interval", "0.5s"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    store = Store(data / "jetwatch.duckdb")
    try:
        wait_until(lambda: store.exists() and rows(store, "SELECT count(*) FROM pin_events")[0][0] > 0
                   and rows(store, "SELECT count(*) FROM consumer_latest")[0][0] > 0, timeout=90,
                   message="the demo, connected with the lifted credentials, pinning and sampled")
        children = {pid: _proc(pid, "cmdline") for pid in _descendants(proc.pid)}
        role = {pid: next((r for r in ("streamlit", "jetwatch.demo", "collect") if r.encode() in cmd), "?")
                for pid, cmd in children.items()}
        assert {"streamlit", "jetwatch.demo", "collect"} <= set(role.values()), role
        for _pid, cmdline in [(proc.pid, _proc(proc.pid, "cmdline")), *children.items()]:
            assert PASSWORD.encode() not in cmdline and OP_SECRET.encode() not in cmdline, cmdline
        for pid, r in role.items():
            environ = _proc(pid, "environ")
            assert (OP_SECRET.encode() in environ) == (r == "streamlit"), r  # only the dashboard checks it
            assert (PASSWORD.encode() in environ) == (r != "?"), r  # only the NATS clients connect
            assert b"jw:" + PASSWORD.encode() not in environ  # and never inside a URL
        status = rows(store, "SELECT server_url FROM collector_status")
        assert status == [(f"nats://127.0.0.1:{port}",)]

        # The dashboard's pages, as that process's settings would render them, operator dialog open.
        for k in [k for k in os.environ if k.startswith("JETWATCH_")]:
            monkeypatch.delenv(k)
        for k, v in {"JETWATCH_SERVER": f"nats://jw:{PASSWORD}@127.0.0.1:{port}", "JETWATCH_DB": str(store.path),
                     "JETWATCH_OPERATOR_SECRET": OP_SECRET, "JETWATCH_DATA_DIR": str(data),
                     "JETWATCH_OPERATORS_FILE": operators}.items():
            monkeypatch.setenv(k, v)
        st.cache_data.clear()
        stream, consumer = rows(store, "SELECT stream, consumer FROM consumer_latest ORDER BY 1, 2")[0]
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params["stream"], at.query_params["consumer"] = stream, consumer
        at.run()
        fleet = _page_text(at)
        at.switch_page("views/consumer.py").run()
        at.text_input(key="op_name").input("ana")
        at.text_input(key="op_secret").input(OP_SECRET)
        at.button(key="op_enable").click().run()
        at.button(key="action_pause").click().run()
        dialog = _page_text(at)
        # escaped Markdown, and a word joiner keeping the address from becoming a link (dashboard/ui.md)
        assert f"on cluster default, nats://127.0.0.1:{port}, as ana" in dialog.replace("\\", "").replace(WORD_JOINER, "")
        assert PASSWORD not in fleet + dialog and OP_SECRET not in fleet + dialog
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert PASSWORD.encode() not in out and OP_SECRET.encode() not in out
    for log in (data / "logs").iterdir():
        text = log.read_bytes()
        assert PASSWORD.encode() not in text and OP_SECRET.encode() not in text, log.name
    store_text = _store_text(store)
    assert PASSWORD not in store_text and OP_SECRET not in store_text


def test_no_command_shows_the_password_of_a_server_url_even_when_it_fails(secret_server, tmp_path):
    db = str(tmp_path / "c.duckdb")
    url = f"nats://jw:{PASSWORD}@127.0.0.1:{secret_server.port}"
    dead = f"nats://jw:{PASSWORD}@127.0.0.1:1"
    said = ""
    for args in (["setup", "--server", url], ["pause", "NOPE", "c", "--until", "5m", "--yes", "--db", db, "--server", url],
                 ["resume", "NOPE", "c", "--yes", "--db", db, "--server", dead, "--connect-timeout", "1s"],
                 ["status", "--db", db], ["check", "--db", db], ["audit", "verify", "--db", db]):
        done = jetwatch(*args, env=clean_env())
        said += done.stdout + done.stderr
        assert "Traceback" not in done.stderr, done.stderr
    assert "could not connect to NATS at nats://127.0.0.1:1" in said
    assert "capture stream JETWATCH_ADVISORIES is ready" in said  # the URL's credentials were used
    assert PASSWORD not in said
    assert PASSWORD not in _store_text(Store(db))


def test_the_operator_secret_has_no_command_line_form(tmp_path):
    import socket

    with socket.socket() as taken:  # should the flag be taken, the dashboard stops at once, port in use
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for flag in ("--operator-secret", "--operator-secret-fil"):  # nor as an abbreviation of another flag
            done = jetwatch("dashboard", flag, OP_SECRET, "--db", str(tmp_path / "x.duckdb"), "--port", port)
            assert done.returncode == 2, done.stdout + done.stderr
            assert f"unrecognized arguments: {flag}" in done.stderr
    dockerfile = (Path(__file__).resolve().parents[1] / "Dockerfile").read_text()
    cmds = [line for line in dockerfile.splitlines() if line.startswith("CMD")]
    assert cmds and not any("--server" in cmd or "secret" in cmd for cmd in cmds), cmds
    [up] = [cmd for cmd in cmds if "exec jetwatch up" in cmd]
    assert "$NATS_URL" not in up.split("exec", 1)[1]


# 5. Pin history says what it can vouch for ----------------------------------------------------

def test_an_advisory_that_claims_another_account_is_rejected_never_filed_under_that_account(two_accounts, tmp_path,
                                                                                            run):
    """A user of APP publishes a PINNED advisory for A/wa that says `"account": "OTHER"`: it used to
    become OTHER's pin event (OTHER has an A/wa too). The server publishes a consumer's advisories
    in its own account, naming that account: this one is rejected, in words, and the same forgery
    naming APP is stored as APP's (unconfirmed, as any forged pin)."""
    from tests.helpers import collecting, collector_settings, eventually

    db = str(tmp_path / "adv.duckdb")
    store = Store(db)
    now = dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")

    def forged(advisory_id: str, account: str) -> bytes:
        return json.dumps({"type": "io.nats.jetstream.advisory.v1.consumer_group_pinned", "id": advisory_id,
                           "timestamp": now, "account": account, "stream": "A", "consumer": "wa", "group": "jobs",
                           "pinned_id": f"PIN-{advisory_id}"}).encode()

    async def scenario() -> None:
        settings = collector_settings(two_accounts.url, db, ("A",), user="app", password="app-pw")
        async with collecting(settings):
            plain = await nats.connect(two_accounts.url, user="plain", password="plain-pw")
            subject = "$JS.EVENT.ADVISORY.CONSUMER.PINNED.A.wa"
            await plain.publish(subject, forged("claims-other", "OTHER"))
            await plain.publish(subject, forged("claims-app", "APP"))
            await plain.flush()
            await eventually(lambda: rows(store, "SELECT count(*) FROM rejects WHERE contains(raw, 'claims-other')"
                                          )[0][0] == 1 and rows(store, "SELECT count(*) FROM advisories WHERE id = "
                                                                       "'claims-app'")[0][0] == 1,
                             timeout=30, message="both forgeries read")
            await plain.close()

    run(scenario())
    assert rows(store, "SELECT count(*) FROM advisories WHERE account = 'OTHER' OR id = 'claims-other'") == [(0,)]
    assert rows(store, "SELECT count(*) FROM pin_events WHERE account = 'OTHER'") == [(0,)]
    assert rows(store, "SELECT account FROM pin_events WHERE pinned_id = 'PIN-claims-app'") == [("APP",)]
    (error,), = rows(store, "SELECT error FROM rejects WHERE contains(raw, 'claims-other')")
    assert error == ("advisory claims account 'OTHER', but it was published in account 'APP', whose advisories "
                     "name only their own account: forged, or imported from another account; not stored"), error


def _documented_deny_block() -> str:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "security.md").read_text()
    block = doc.split("Ordinary users of an account watched by jetwatch:", 1)[1]
    return block.split("```", 2)[1].split("\n", 1)[1]  # the fenced block, without its language tag


def test_a_forged_pinned_advisory_is_stored_as_unconfirmed_and_the_readme_permission_stops_it(
        tmp_path, run, monkeypatch):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from jetwatch.demo.workers import PullWorker
    from tests.helpers import collecting, collector_settings, eventually, publish
    from tests.test_dashboard import APP, frame

    permission = " ".join(_documented_deny_block().split())
    conf = tmp_path / "forge.conf"
    conf.write_text("accounts {\n  APP { jetstream: enabled, users: [\n"
                    "    {user: app, password: app-pw}\n    {user: plain, password: plain-pw}\n"
                    f"    {{user: locked, password: locked-pw, {permission} }}\n  ] }}\n}}\n")
    server = NatsServer(store_dir=tmp_path / "js", extra_args=["-c", str(conf)]).start()
    db = str(tmp_path / "f.duckdb")
    store = Store(db)
    forged = json.dumps({"type": "io.nats.jetstream.advisory.v1.consumer_group_pinned", "id": "{id}",
                         "timestamp": dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z"), "account": "APP", "stream": "P", "consumer": "w",
                         "group": "jobs", "pinned_id": "{pin}"})
    subject = "$JS.EVENT.ADVISORY.CONSUMER.PINNED.P.w"
    pins = "SELECT pinned_id, vouched FROM pin_events WHERE event = 'pinned' ORDER BY ts"

    async def scenario() -> str:
        nc = await nats.connect(server.url, user="app", password="app-pw")
        api = JetStreamAPI(nc)
        await make_stream(api, "P", ["p.work"])
        await make_consumer(api, "P", "w", "pinned_client", timeout_s=30)
        errors: list[str] = []

        async def on_error(exc: Exception) -> None:
            errors.append(str(exc))

        settings = collector_settings(server.url, db, ("P",), user="app", password="app-pw")
        async with collecting(settings):
            worker = PullWorker(nc, "P", "w", "jobs", name="real").start()
            await publish(nc, "p.work", 2)
            real = await eventually(lambda: worker.pin_id, message="a real pin")
            locked = await nats.connect(server.url, user="locked", password="locked-pw", error_cb=on_error)
            await locked.publish(subject, forged.replace("{id}", "forged-1").replace("{pin}", "LOCKEDFORGERY").encode())
            await locked.flush()  # the server has handled (and refused) it once the flush returns
            plain = await nats.connect(server.url, user="plain", password="plain-pw")
            await plain.publish(subject, forged.replace("{id}", "forged-2").replace("{pin}", "PLAINFORGERY").encode())
            await plain.flush()
            await eventually(lambda: ("PLAINFORGERY", "unconfirmed") in rows(store, pins)
                             and (real, "confirmed") in rows(store, pins), timeout=30,
                             message="the real pin confirmed and the forged one unconfirmed")
            await eventually(lambda: errors, message="the permission violation reported to the locked user")
            await worker.stop()
            for c in (locked, plain):
                await c.close()
        await nc.close()
        assert "permissions violation" in errors[0].lower()
        return real

    try:
        real = run(scenario())
    finally:
        server.stop()
    stored = dict(rows(store, pins))
    assert stored == {real: "confirmed", "PLAINFORGERY": "unconfirmed"}  # the locked user's forgery never landed

    for k in [k for k in os.environ if k.startswith("JETWATCH_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("JETWATCH_DB", db)
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/pins.py").run()
    assert not at.exception, [e.message for e in at.exception]
    events = frame(at, "Vouched")
    shown = dict(zip(events["Pin id (tail)"], events["Vouched"]))  # pin ids show their distinguishing tail
    assert shown["…ORGERY"] == "unconfirmed" and shown["…" + real[-6:]] == "confirmed"
    assert any("1 pin(s) marked **unconfirmed**" in c.value for c in at.caption)
