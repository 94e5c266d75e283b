"""Actions from the dashboard: the operator gate, confirmation, audit, and a drain that outlives its page."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import nats
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from jetwatch.actions.operations import Target
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.demo.workers import PullWorker
from jetwatch.store.database import Store
from tests.helpers import (
    OPERATOR_PASSWORD,
    LoopThread,
    make_consumer,
    make_stream,
    operators_file,
    pages_on,
    publish,
    rows,
    wait_until,
)
from tests.test_dashboard import APP

SECRET = OPERATOR_PASSWORD


@pytest.fixture
def live(nats_server, db_path, uid, monkeypatch):
    """A pinned consumer with two real workers on a background loop, and a collector process."""
    stream, consumer = f"{uid}_ACT", "work"
    loop = LoopThread()

    async def setup():
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.act"])
        await make_consumer(api, stream, consumer, "pinned_client", timeout_s=30, ack_wait=30 * 10**9)
        workers = [PullWorker(nc, stream, consumer, "jobs", name=n).start() for n in "ab"]
        return nc, api, workers

    nc, api, workers = loop.call(setup())
    env = {**os.environ, "JETWATCH_INCLUDE_STREAMS": stream, "JETWATCH_INFERENCE_GRACE": "1.5s"}
    collector = subprocess.Popen([sys.executable, "-m", "jetwatch.cli", "collect", "--server", nats_server.url,
                                  "--db", db_path, "--interval", "0.3s"], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = Store(db_path)
    loop.call(publish(nc, f"{uid}.act", 2))
    wait_until(lambda: store.exists() and rows(store, "SELECT * FROM pin_events WHERE stream = ?", [stream])
               and rows(store, "SELECT * FROM consumer_latest WHERE stream = ? AND pinned_id IS NOT NULL", [stream]),
               timeout=30, message="first pin stored and sampled")
    pages_on(monkeypatch, db_path, nats_server.url)
    st.cache_data.clear()
    yield {"stream": stream, "consumer": consumer, "store": store, "loop": loop, "nc": nc, "api": api,
           "workers": workers, "uid": uid, "operators": operators_file(os.path.dirname(db_path), "ana")}
    collector.send_signal(signal.SIGTERM)
    collector.wait(30)
    loop.close()


def consumer_page(live) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["stream"] = live["stream"]
    at.query_params["consumer"] = live["consumer"]
    at.run()
    at.switch_page("views/consumer.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def login(at: AppTest, name: str = "ana", secret: str = SECRET) -> AppTest:
    at.text_input(key="op_name").input(name)
    at.text_input(key="op_secret").input(secret)
    at.button(key="op_enable").click().run()
    return at


def button_keys(at: AppTest) -> set[str]:
    return {b.key for b in at.button if b.key}


def test_without_a_signed_in_operator_no_action_can_be_triggered(live, monkeypatch):
    at = consumer_page(live)
    assert not {k for k in button_keys(at) if k.startswith("action_")}
    assert any("Read-only" in c.value for c in at.sidebar.caption)

    monkeypatch.setenv("JETWATCH_OPERATORS_FILE", live["operators"])
    at = login(consumer_page(live), secret="wrong")
    assert not {k for k in button_keys(at) if k.startswith("action_")}
    assert any("wrong password" in e.value for e in at.sidebar.error)

    # An operators file that cannot be read is never said as a wrong password.
    broken = os.path.join(os.path.dirname(live["operators"]), "broken-operators")
    with open(broken, "wb") as f:
        f.write(b"ana:\xff\xfe not text\n")
    os.chmod(broken, 0o600)
    monkeypatch.setenv("JETWATCH_OPERATORS_FILE", broken)
    at = login(consumer_page(live))
    assert any("Sign-in is unavailable: the operators file cannot be read" in e.value for e in at.sidebar.error), \
        [e.value for e in at.sidebar.error]
    monkeypatch.setenv("JETWATCH_OPERATORS_FILE", live["operators"])

    # Even a forged request in session state is refused at the action path.
    at.session_state["pending_action"] = {"action": "unpin", "target": Target(None, live["stream"], live["consumer"]),
                                          "params": {}}
    at.run()
    at.button(key="action_confirm").click().run()
    assert at.session_state["action_result"].message == "refused: operator actions are not enabled"
    assert rows(live["store"], "SELECT * FROM audit") == []


def test_unpin_from_the_dashboard_is_confirmed_audited_and_the_new_pin_shows(live, monkeypatch):
    monkeypatch.setenv("JETWATCH_OPERATORS_FILE", live["operators"])
    at = login(consumer_page(live))
    assert {"action_unpin", "action_pause", "action_resume", "action_drain"} <= button_keys(at)
    at.button(key="action_unpin").click().run()
    dialog_text = " ".join(m.value for m in at.markdown)
    assert f"stream {live['stream']}, consumer {live['consumer']}, group jobs".replace("_", "\\_") in dialog_text
    at.button(key="action_confirm").click().run()
    assert not at.exception
    assert any(s.value.replace("\\", "").startswith(f"unpin {live['stream']} / {live['consumer']} (account ")
               and "unpinned " in s.value for s in at.success)  # the banner names its consumer
    store = live["store"]
    live["loop"].call(publish(live["nc"], f"{live['uid']}.act", 2))
    pins = "SELECT event, reason FROM pin_events WHERE stream = ? ORDER BY ts, event DESC"
    wait_until(lambda: len(rows(store, pins, [live["stream"]])) >= 3, timeout=30, message="admin unpin and new pin")
    assert rows(store, pins, [live["stream"]])[:3] == [("pinned", None), ("unpinned", "admin"), ("pinned", None)]
    audit = rows(store, "SELECT actor, origin, action, stream, group_name, outcome FROM audit WHERE phase = 'outcome'")
    assert audit == [("ana", "dashboard", "unpin", live["stream"], "jobs", "ok")]
    at.run()
    # The Pin holder tile says the new pin once, never the dropped one above it.
    dropped = at.session_state["action_result"].details["unpinned_id"]
    new = rows(store, "SELECT pinned_id FROM pin_events WHERE stream = ? AND event = 'pinned' ORDER BY ts DESC LIMIT 1",
               [live["stream"]])[0][0]
    [tile] = [m for m in at.metric if m.label == "Pin holder"]
    assert tile.value == f"…{new[-6:]}" and new != dropped, (tile.value, new, dropped)
    captions = [c.value for c in at.caption]
    assert f"new pin, after your unpin (pin id {new})" in captions and "unannounced" not in captions, captions
    assert not [c for c in captions if dropped[-6:] in c], captions


def test_pause_is_confirmed_for_the_whole_consumer_at_a_plain_time_and_resume_only_offered_when_paused(live, monkeypatch):
    """Pause acts on the consumer, not its priority group: the dialog names no group, and says its
    time as the pages do (no microseconds, no ISO 'T'). Resume is offered only on a paused consumer."""
    import re

    monkeypatch.setenv("JETWATCH_OPERATORS_FILE", live["operators"])
    at = login(consumer_page(live))
    assert at.button(key="action_resume").disabled  # not paused: nothing to resume
    at.button(key="action_pause").click().run()
    said = next(m.value for m in at.markdown if m.value.startswith("**Pause ")).replace("\\", "")
    assert f"stream {live['stream']}, consumer {live['consumer']} until " in said and "group" not in said, said
    # 15 minutes from the click, said a moment later: "in 15 min", or "in 14 min 59 s" on a busy machine.
    assert re.search(r"until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(in (15 min|14 min [1-5]?\d s)\)\*\*$", said), said
    at.button(key="action_confirm").click().run()
    assert not at.exception
    store = live["store"]
    wait_until(lambda: rows(store, "SELECT paused FROM consumer_latest WHERE stream = ?", [live["stream"]]) == [(True,)],
               timeout=30, message="the pause sampled")
    st.cache_data.clear()
    at.run()
    assert not at.button(key="action_resume").disabled


def test_a_dashboard_drain_survives_its_page_being_closed(live, monkeypatch):
    monkeypatch.setenv("JETWATCH_OPERATORS_FILE", live["operators"])
    loop, nc = live["loop"], live["nc"]
    holder = next(w for w in live["workers"] if w.pin_id)
    holder.acking = False
    loop.call(publish(nc, f"{live['uid']}.act", 3))
    wait_until(lambda: len(holder._unacked) == 3, message="work in flight")
    at = login(consumer_page(live))
    at.selectbox(key="drain_then").set_value("handoff").run()
    at.button(key="action_drain").click().run()
    at.button(key="action_confirm").click().run()
    assert any("runs on if this page closes" in s.value for s in at.success)
    del at  # the tab is closed mid-drain
    store = live["store"]
    drains = "SELECT state, ack_pending_start, ack_pending_now FROM drains"
    wait_until(lambda: rows(store, drains) and rows(store, drains)[0][0] == "draining", timeout=30,
               message="the detached drain reports progress")
    assert rows(store, drains)[0][1] == 3
    loop.call(holder.ack_held())
    wait_until(lambda: rows(store, drains)[0][0] == "done", timeout=30, message="the drain finished")
    audit = rows(store, "SELECT actor, origin, action, outcome FROM audit WHERE phase = 'outcome'")
    assert audit == [("ana", "dashboard", "drain", "ok")]
    reopened = consumer_page(live)
    assert any("drain" in s.value and "done" in s.value for s in reopened.success)


@pytest.mark.parametrize("named_by", ["--dbs FILE", "--db DIR"])
def test_a_dashboard_drain_runs_on_the_store_the_dashboard_acts_on(live, monkeypatch, named_by):
    """The store named as the fleet's one file, or as a directory holding it: the drain's process
    reads its intent from that store and runs to the end there."""
    monkeypatch.delenv("JETWATCH_DB")
    if named_by == "--dbs FILE":
        monkeypatch.setenv("JETWATCH_DBS", str(live["store"].path))
    else:
        monkeypatch.setenv("JETWATCH_DB", os.path.dirname(live["store"].path))
    monkeypatch.setenv("JETWATCH_OPERATORS_FILE", live["operators"])
    at = login(consumer_page(live))
    at.button(key="action_drain").click().run()
    at.button(key="action_confirm").click().run()
    assert any("runs on if this page closes" in s.value for s in at.success)
    store = live["store"]
    wait_until(lambda: rows(store, "SELECT state FROM drains") not in ([], [("starting",)]), timeout=30,
               message="the drain's process under way")
    wait_until(lambda: rows(store, "SELECT state FROM drains") == [("done",)], timeout=30, message="the drain done")
    assert rows(store, "SELECT action, outcome FROM audit WHERE phase = 'outcome'") == [("drain", "ok")]


def test_a_drain_process_that_ends_before_it_runs_is_audited_and_shown_failed(live, tmp_path):
    """The drain's process refuses its settings and exits at once (here: a credentials file gone
    since the dashboard read it): the drain is failed in the store, its outcome audited, and the
    page's banner says so with the process's own words."""
    from jetwatch.actions.drains import spawn_detached
    from jetwatch.actions.operations import ActionResult, DrainPlan
    from jetwatch.core.settings import Settings
    from jetwatch.dashboard.operator import _drain_state, banner_text

    store = live["store"]
    gone = str(tmp_path / "gone" / "app.creds")
    settings = Settings({"server": os.environ["JETWATCH_SERVER"], "db": str(store.path),
                         "account_contexts": (f"APP={gone}",)})
    target = Target(None, live["stream"], live["consumer"])
    drain_id = spawn_detached(settings, store, target, DrainPlan("resume", 10.0), "ana", tmp_path / "logs")
    wait_until(lambda: rows(store, "SELECT state FROM drains") == [("failed",)], timeout=30,
               message="the drain marked failed")
    [(message,)] = rows(store, "SELECT message FROM drains")
    assert "no credentials file there" in message and "ended before" in message, message
    audit = rows(store, "SELECT phase, outcome, action_id FROM audit ORDER BY seq")
    assert audit == [("intent", "pending", drain_id), ("outcome", "failed", drain_id)]
    started = ActionResult("drain", target, True, f"drain {drain_id} started", None, {"drain_id": drain_id})
    ok, text = banner_text(started, _drain_state(store, started))
    assert not ok and "now failed" in text and "no credentials file there" in text
