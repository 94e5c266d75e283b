"""The dashboard as an attacker and a tired operator meet it: the target of an action is a
consumer (never a row), a pin confirmed is the pin dropped, hostile names stay literal text,
operators are people with firm sessions, and foreign hosts are refused."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import nats
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.core.settings import DEFAULT_CLUSTER
from jetwatch.dashboard.tables import link_target
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
from tests.test_dashboard import frame as table_with

SECRET = OPERATOR_PASSWORD

# The browser tests navigate with wait_until="commit" (the response has begun): each then waits for an
# element of the running page, with its own deadline. The page's load event (Streamlit's script
# bundle fetched and run, in a fresh browser context each time) is a condition of none of them, and
# a loaded machine took longer than Playwright's 30 s to reach it.


@pytest.fixture(autouse=True)
def fresh_throttle():
    """Sign-in limits are per dashboard process: each test starts with none spent."""
    from jetwatch.dashboard import identities
    identities.THROTTLE = identities.Throttle()
    yield
    identities.THROTTLE = identities.Throttle()


@pytest.fixture
def two_streams(nats_server, db_path, uid, monkeypatch):
    """ORDERS/fulfilment (pinned_client, two real pulling workers) and EVENTS/notify, sampled by a
    real collector process. Unfiltered, EVENTS sorts first: row 0 is notify, not fulfilment."""
    orders, events = f"{uid}_ORDERS", f"{uid}_EVENTS"
    loop = LoopThread()

    async def setup():
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, orders, [f"{uid}.orders"])
        await make_consumer(api, orders, "fulfilment", "pinned_client", timeout_s=30, ack_wait=30 * 10**9)
        await make_stream(api, events, [f"{uid}.events"])
        await make_consumer(api, events, "notify")
        workers = [PullWorker(nc, orders, "fulfilment", "jobs", name=n).start() for n in "ab"]
        await publish(nc, f"{uid}.orders", 2)
        return nc, api, workers

    nc, api, workers = loop.call(setup())
    env = {**os.environ, "JETWATCH_INCLUDE_STREAMS": f"{uid}_*", "JETWATCH_INFERENCE_GRACE": "1.5s"}
    collector = subprocess.Popen([sys.executable, "-m", "jetwatch.cli", "collect", "--server", nats_server.url,
                                  "--db", db_path, "--interval", "0.3s"], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = Store(db_path)
    latest = "SELECT stream, consumer, pinned_id FROM consumer_latest WHERE stream LIKE ?"
    wait_until(lambda: store.exists() and len(rows(store, latest, [f"{uid}_%"])) == 2
               and any(r[2] for r in rows(store, latest, [f"{uid}_%"])), timeout=30,
               message="both consumers sampled, fulfilment with a pin")
    pages_on(monkeypatch, db_path, nats_server.url)
    monkeypatch.setenv("JETWATCH_OPERATORS_FILE", operators_file(os.path.dirname(db_path), "ana"))
    st.cache_data.clear()
    yield {"orders": orders, "events": events, "store": store, "loop": loop, "nc": nc, "api": api,
           "workers": workers, "uid": uid}
    collector.send_signal(signal.SIGTERM)
    collector.wait(30)
    loop.close()
    st.cache_data.clear()


def login(at: AppTest, name: str = "ana", secret: str = SECRET) -> AppTest:
    at.text_input(key="op_name").input(name)
    at.text_input(key="op_secret").input(secret)
    at.button(key="op_enable").click().run()
    return at


def fleet_table(at: AppTest):
    """The Fleet's table element (its key changes with the consumers it shows)."""
    found = [d for d in at.dataframe if d.key and d.key.startswith("fleet_table")]
    assert len(found) == 1, [d.key for d in at.dataframe]
    return found[0]


def shown(at: AppTest):
    """The Fleet table as shown, with the consumer's name beside its link."""
    value = fleet_table(at).value
    table = value.data if hasattr(value, "data") else value  # a pandas Styler, or the frame
    return table.assign(consumer=[link_target(u)["consumer"] for u in table["Consumer"]])


def click_row(at: AppTest, consumer: str) -> AppTest:
    """Tick the row of `consumer` in the table as shown, as the browser would."""
    table = fleet_table(at)
    position = list(shown(at)["consumer"]).index(consumer)
    at.session_state[table.key] = {"selection": {"rows": [position], "columns": []}}
    return at.run()


def selected_heading(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**") and " / " in m.value)


def test_fleet_selection_is_the_consumer_and_survives_clearing_the_search(two_streams):
    orders, events = two_streams["orders"], two_streams["events"]
    at = login(AppTest.from_file(APP, default_timeout=60).run())
    assert not at.exception, [e.message for e in at.exception]
    unfiltered = shown(at)
    assert list(unfiltered["consumer"])[0] == "notify"  # row 0 of the unfiltered table is EVENTS/notify

    at.text_input(key="fleet_search").input("orders").run()
    assert list(shown(at)["consumer"]) == ["fulfilment"]
    click_row(at, "fulfilment")
    assert selected_heading(at).startswith(f"**{orders.replace('_', chr(92) + '_')} / fulfilment**")

    at.text_input(key="fleet_search").input("").run()
    assert len(shown(at)) == 2
    assert selected_heading(at).startswith(f"**{orders.replace('_', chr(92) + '_')} / fulfilment**")
    assert events.replace("_", "\\_") not in selected_heading(at)
    marked = shown(at)
    assert list(marked[marked[" "] == "▶"]["consumer"]) == ["fulfilment"]  # the table marks the consumer

    at.button(key="fleet_unpin").click().run()
    question = " ".join(m.value for m in at.markdown)
    assert f"stream {orders}, consumer fulfilment".replace("_", "\\_") in question
    assert "notify" not in question


def _pin_now(two_streams) -> str | None:
    """The pin the server holds for the orders consumer's group now."""
    info = two_streams["loop"].call(two_streams["api"].consumer_info(two_streams["orders"], "fulfilment"))
    groups = info.get("priority_groups") or []
    return (groups[0].get("pinned_client_id") or None) if groups else None


def _asked_to_unpin(two_streams) -> tuple[AppTest, str | None]:
    """An operator signed in who picked the orders consumer on the Fleet, once its sampled pin is the
    server's, and asked to unpin it: the page with its confirmation open, and that pin."""
    at = login(AppTest.from_file(APP, default_timeout=60).run())
    at.text_input(key="fleet_search").input("orders").run()
    click_row(at, "fulfilment")
    first = _pin_now(two_streams)
    wait_until(lambda: rows(two_streams["store"], "SELECT pinned_id FROM consumer_latest WHERE stream = ?",
                            [two_streams["orders"]])[0][0] == first, message="the sampled pin is the server's")
    st.cache_data.clear()
    at.run()
    at.button(key="fleet_unpin").click().run()
    return at, first


def test_unpin_sends_only_if_the_confirmed_pin_is_still_the_pin(two_streams):
    loop, api, orders = two_streams["loop"], two_streams["api"], two_streams["orders"]

    def pin_now() -> str | None:
        return _pin_now(two_streams)

    at, first = _asked_to_unpin(two_streams)
    question = " ".join(m.value for m in at.markdown)
    assert f"drops pin {first}, held by unannounced …{first[-6:]}" in question  # no worker announced it

    # Between the operator's look and Confirm, the pin moves (an admin unpin elsewhere, and the
    # other waiting client is pinned at its next pull).
    loop.call(api.unpin(orders, "fulfilment", "jobs"))
    loop.call(publish(two_streams["nc"], f"{two_streams['uid']}.orders", 2))
    wait_until(lambda: pin_now() not in (None, first), timeout=30, message="a new pin")
    second = pin_now()

    at.button(key="action_confirm").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert pin_now() == second  # nothing was sent: the new pin still holds
    warning = " ".join(w.value for w in at.warning)
    assert "pin moved" in warning and first in warning and second in warning
    assert f"drops pin {second}" in " ".join(m.value for m in at.markdown)  # asked again, naming the new pin
    assert rows(two_streams["store"], "SELECT actor, action, outcome FROM audit WHERE phase = 'outcome'") == [
        ("ana", "unpin", "refused")]  # audited as what it was: refused, nothing sent

    at.button(key="action_confirm").click().run()
    assert any(s.value.replace("\\", "").startswith(f"unpin {orders} / fulfilment (account ") and f": unpinned {second}" in s.value
               for s in at.success)  # the banner names its consumer
    assert pin_now() != second
    audit = rows(two_streams["store"], "SELECT actor, action, stream, outcome FROM audit WHERE phase = 'outcome' "
                                       "ORDER BY seq")
    assert audit == [("ana", "unpin", orders, "refused"), ("ana", "unpin", orders, "ok")]


def test_a_pin_that_keeps_moving_is_unpinned_whoever_holds_it_once_confirmed_as_such(two_streams):
    """A pin that moves between every look and every Confirm: after the refusal, the operator may
    drop whoever holds it when the unpin is sent, said so in the question, and audited with that
    choice and the pin the server actually dropped."""
    loop, api, orders = two_streams["loop"], two_streams["api"], two_streams["orders"]

    def pin_now() -> str | None:
        return _pin_now(two_streams)

    def move_pin(away_from: str | None) -> str:
        loop.call(api.unpin(orders, "fulfilment", "jobs"))
        loop.call(publish(two_streams["nc"], f"{two_streams['uid']}.orders", 2))
        wait_until(lambda: pin_now() not in (None, away_from), timeout=30, message="a new pin")
        return str(pin_now())

    at, first = _asked_to_unpin(two_streams)
    assert not [b for b in at.button if b.key == "action_confirm_any"], "offered only once a pin moved under a Confirm"
    second = move_pin(first)
    at.button(key="action_confirm").click().run()
    assert pin_now() == second and "pin moved" in " ".join(w.value for w in at.warning)

    third = move_pin(second)  # and again, before the operator answers
    at.button(key="action_confirm_any").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert pin_now() != third, "the pin held when the unpin was sent was dropped"
    assert any(f"unpinned {third}" in s.value.replace("\\", "") and "as you confirmed: whoever held it when sent"
               in s.value.replace("\\", "") for s in at.success), [s.value for s in at.success]
    outcome = rows(two_streams["store"], "SELECT outcome, parameters FROM audit WHERE phase = 'outcome' ORDER BY seq")
    assert [o for o, _ in outcome] == ["refused", "ok"]
    kept = json.loads(outcome[-1][1])
    assert kept["any_holder"] is True and kept["unpinned_id"] == third, kept


HTML = "<img src=x onerror=alert(1)>"
LINK = "[click](javascript:alert(1))"
RLO = "\u202eorders"
BIDI_CHARS = "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
UNESCAPED = re.compile(r"(?<!\\)<img|(?<!\\)\]\(javascript")  # markup Markdown would act on
HOSTILE = f"{HTML} {LINK} {RLO}"  # for fields the server or a form fills freely: pin ids, actors, errors


def page_texts(at: AppTest) -> list[str]:
    """Every text element's source as Streamlit got it (Markdown, captions, alerts, metrics...)."""
    out: list[str] = []
    for kind in ("markdown", "caption", "title", "header", "subheader", "success", "error", "warning", "info",
                 "exception", "code", "latex"):
        out += [str(e.value) for e in getattr(at, kind)]
    out += [str(m.value) + " " + str(m.label) for m in at.metric]
    out += [p.proto.text for p in at.get("progress")]
    return out


def chart_text(chart) -> str:
    """A plotly chart's figure as the browser gets it, decoded (its JSON escapes <, > and non-ASCII)."""
    import json
    return json.dumps(json.loads(chart.proto.spec), ensure_ascii=False)


def literal_in_markdown(text: str) -> str:
    """How ui.md writes `text` into Markdown: every special character escaped, bidi made visible."""
    from jetwatch.dashboard.ui import md
    return md(text)


def assert_all_literal(at: AppTest, hostile: list[str]) -> str:
    texts = page_texts(at)
    for t in texts:
        assert not any(c in t for c in BIDI_CHARS), f"raw bidi control in {t!r}"
        assert not UNESCAPED.search(t), f"unescaped markup in {t!r}"
    for frame in at.dataframe:
        value = frame.value.data if hasattr(frame.value, "data") else frame.value
        cells = " ".join(str(v) for v in value.astype(str).to_numpy().ravel())
        assert not any(c in cells for c in BIDI_CHARS), f"raw bidi control in table {frame.key}"
    for chart in at.get("plotly_chart"):
        spec = chart_text(chart)
        assert "<img" not in spec and not any(c in spec for c in BIDI_CHARS), "raw markup or bidi in a chart"
    joined = "\n".join(texts)
    for h in hostile:
        assert literal_in_markdown(h) in joined, f"{h!r} not shown as literal text"
    return joined


@pytest.fixture
def hostile_store(nats_server, db_path, uid, monkeypatch):
    """A real collector's store whose names, pin ids, drain and error texts are an attacker's:
    the longest name the server accepts (255), an RTL override and a Markdown link in a stream
    name, and a forged PINNED advisory whose pin id is HTML, a link and an RTL override."""
    import json
    import uuid

    from jetwatch.actions.drains import DrainTracker
    from jetwatch.actions.operations import ActionResult, Target
    from jetwatch.core.clock import rfc3339, utcnow
    from jetwatch.store import writes

    stream, consumer = f"{uid}{RLO}{LINK}<b", "c_" + "B" * 253
    assert len(consumer) == 255
    loop = LoopThread()

    async def setup():
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.hostile"])
        await make_consumer(api, stream, consumer, "pinned_client", timeout_s=30)
        worker = PullWorker(nc, stream, consumer, "jobs", name="a").start()
        await publish(nc, f"{uid}.hostile", 2)
        return nc, worker

    nc, worker = loop.call(setup())
    env = {**os.environ, "JETWATCH_INCLUDE_STREAMS": f"{uid}*", "JETWATCH_INFERENCE_GRACE": "1.5s"}
    collector = subprocess.Popen([sys.executable, "-m", "jetwatch.cli", "collect", "--server", nats_server.url,
                                  "--db", db_path, "--interval", "0.3s"], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = Store(db_path)
    try:
        wait_until(lambda: store.exists() and rows(store, "SELECT * FROM pin_events WHERE stream = ?", [stream]),
                   timeout=30, message="the real pin stored")
        forged = {"type": "io.nats.jetstream.advisory.v1.consumer_group_pinned", "id": uuid.uuid4().hex,
                  "timestamp": rfc3339(utcnow()), "account": "$G", "stream": stream, "consumer": consumer,
                  "domain": "", "group": "jobs", "pinned_id": HOSTILE}
        before = utcnow()
        loop.call(nc.publish(f"$JS.EVENT.ADVISORY.CONSUMER.PINNED.{stream}.{consumer}", json.dumps(forged).encode()))
        wait_until(lambda: rows(store, "SELECT * FROM pin_events WHERE pinned_id = ?", [HOSTILE]), timeout=30,
                   message="the forged pin stored")
    finally:
        collector.send_signal(signal.SIGTERM)
        collector.wait(30)
        loop.call(worker.stop())
        loop.call(nc.close())
        loop.close()
    target = Target("$G", stream, consumer, "jobs")
    tracker = DrainTracker(store, "d1", HOSTILE, target, "resume")
    tracker.finish(ActionResult("drain", target, True, HOSTILE))
    status = store.read(lambda con: con.execute("SELECT * FROM collector_status").fetch_df()).iloc[0].to_dict()
    status.update(last_error=HOSTILE, last_error_at=utcnow())
    store.write(lambda con: writes.write_status(con, status))
    for k in list(os.environ):
        if k.startswith("JETWATCH_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("JETWATCH_DB", db_path)
    monkeypatch.setenv("JETWATCH_STALE_AFTER", "1h")
    monkeypatch.setenv("JETWATCH_OPERATORS_FILE", operators_file(os.path.dirname(db_path), "ana"))
    st.cache_data.clear()
    yield {"stream": stream, "consumer": consumer, "target": target, "before": before,
           "result": ActionResult("unpin", target, True, HOSTILE, None, {"at": before})}
    st.cache_data.clear()


# Bare text that Streamlit's Markdown turns into a link (GFM autolink literals), escaped or not:
# tests/test_browser_hostile.py shows each in Chromium; here, that md() breaks every such start.
AUTOLINKS = ["http://evil.example/login", "HTTPS://evil.example", "www.evil.example/x", "user@evil.example",
             "[Session expired: sign in again](http://evil.example/login)", "![b](http://127.0.0.1:9/b.png)",
             "nats://10.0.0.1:4222"]


@pytest.mark.parametrize("text", AUTOLINKS)
def test_literal_text_in_markdown_starts_no_link(text):
    from jetwatch.dashboard.ui import WORD_JOINER

    written = literal_in_markdown(text)
    unescaped = written.replace("\\", "")
    assert unescaped.replace(WORD_JOINER, "") == text
    assert not re.search(r"(?i):(?=//)|\bwww(?=\.)|(?<!\u2060)@", unescaped), written


def test_every_page_shows_hostile_names_pin_ids_actors_and_errors_as_literal_text(hostile_store):
    stream, consumer = hostile_store["stream"], hostile_store["consumer"]
    at = AppTest.from_file(APP, default_timeout=60).run()
    at = login(at)
    assert not at.exception, [e.message for e in at.exception]
    at.session_state["action_result"] = hostile_store["result"]  # a result whose message the server wrote
    at.session_state["action_results"] = {(DEFAULT_CLUSTER, stream, consumer): hostile_store["result"]}  # its banner
    at.run()
    fleet = assert_all_literal(at, [HOSTILE])  # the result message, last_error
    assert "⟨U\\+202E⟩orders" in fleet  # the override shown, not obeyed
    click_row(at, consumer)
    assert_all_literal(at, [stream, consumer])

    at.query_params.update({"stream": stream, "consumer": consumer})
    at.switch_page("views/consumer.py").run()
    assert not at.exception, [e.message for e in at.exception]
    consumer_page = assert_all_literal(at, [stream, consumer, HOSTILE])
    assert f"(pin id {literal_in_markdown(HOSTILE)})" in consumer_page  # the forged pin id, whole
    [tile] = [m for m in at.metric if m.label == "Pin holder"]
    assert literal_in_markdown(HOSTILE) in tile.help, tile.help  # and escaped in the tile's help (Markdown)
    assert f"by {literal_in_markdown(HOSTILE)}" in consumer_page  # the drain's actor

    at.switch_page("views/pins.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert_all_literal(at, [])
    pins = chart_text(at.get("plotly_chart")[0])
    assert "&lt;img src=x onerror=alert(1)&gt;" in pins and "⟨U+202E⟩" in pins

    at.switch_page("views/audit.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert_all_literal(at, [])


# --- operators are people, sessions are firm ------------------------------------------------


@pytest.fixture
def operator_env(tmp_path, monkeypatch):
    """A dashboard environment with two operators in an identities file and an empty store."""
    for k in list(os.environ):
        if k.startswith("JETWATCH_"):
            monkeypatch.delenv(k)
    path = operators_file(tmp_path, "ana", "bob")
    db = str(tmp_path / "jetwatch.duckdb")
    monkeypatch.setenv("JETWATCH_DB", db)
    monkeypatch.setenv("JETWATCH_OPERATORS_FILE", path)
    st.cache_data.clear()
    return {"file": path, "store": Store(db), "monkeypatch": monkeypatch}


def sidebar_text(at: AppTest) -> str:
    parts = [c.value for c in at.sidebar.caption] + [e.value for e in at.sidebar.error] + [i.value for i in at.sidebar.info]
    return "\n".join(parts)


def signed_in(at: AppTest) -> bool:
    return any(b.key == "op_lock" for b in at.sidebar.button)


def fresh_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_only_a_listed_operator_with_their_password_signs_in_and_the_name_is_the_signed_in_one(operator_env):
    at = login(fresh_page(), name="mallory")  # free text is no identity
    assert not signed_in(at) and "wrong password" in sidebar_text(at)
    at = login(at, name="ana", secret="not the password at all")
    assert not signed_in(at)
    at = login(at, name="ana")
    assert signed_in(at) and "signed in as ana" in sidebar_text(at)
    assert not any(t.key == "op_name" for t in at.sidebar.text_input)  # nothing to type a name into


def test_failed_sign_ins_are_throttled_per_session_then_for_everyone_and_the_throttle_is_audited(operator_env):
    from jetwatch.dashboard import identities

    identities.THROTTLE = identities.Throttle(per_session=3, overall=5)  # the defaults are 5 and 20
    at = fresh_page()
    for _ in range(identities.THROTTLE.per_session):
        login(at, name="ana", secret="guess guess guess")
    assert "too many failed sign-ins in this session" in sidebar_text(at)
    login(at, name="ana")  # the right password, while throttled: not even checked
    assert not signed_in(at)
    audit = rows(operator_env["store"], "SELECT actor, action, outcome FROM audit")
    assert audit == [("unauthenticated:ana", "sign-in", "refused")]

    # New sessions (a reload each) do not reset the dashboard-wide limit.
    while len(identities.THROTTLE._all) < identities.THROTTLE.overall:
        login(fresh_page(), name="bob", secret="guess guess guess")
    other = login(fresh_page(), name="bob")
    assert not signed_in(other) and "too many failed sign-ins on this dashboard" in sidebar_text(other)
    assert ("unauthenticated:bob", "sign-in", "refused") in rows(operator_env["store"],
                                                                  "SELECT actor, action, outcome FROM audit")


def test_with_a_fleet_of_stores_a_sign_in_throttle_is_audited_in_the_first_and_shown_on_the_audit_page(
        tmp_path, monkeypatch):
    """With --dbs, --db is none of the fleet's stores: the throttle's audit row goes into the first
    store --dbs names (the Audit page reads it), and no stray store appears where the dashboard runs."""
    from jetwatch.dashboard import identities
    from jetwatch.store import clusters

    for k in list(os.environ):
        if k.startswith("JETWATCH_"):
            monkeypatch.delenv(k)
    dbs = {c: tmp_path / f"{c}.duckdb" for c in "ab"}
    for cluster, path in dbs.items():
        Store(path).write(lambda con, c=cluster, p=path: clusters.claim(con, c, p))  # as a collector's first write
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("JETWATCH_DBS", f"{dbs['a']},{dbs['b']}")
    monkeypatch.setenv("JETWATCH_OPERATORS_FILE", operators_file(tmp_path, "ana"))
    st.cache_data.clear()
    identities.THROTTLE = identities.Throttle(per_session=2)
    at = fresh_page()
    for _ in range(identities.THROTTLE.per_session):
        login(at, name="ana", secret="guess guess guess")
    assert "too many failed sign-ins in this session" in sidebar_text(at)
    assert rows(Store(dbs["a"]), "SELECT actor, action, outcome FROM audit") == [
        ("unauthenticated:ana", "sign-in", "refused")]
    assert rows(Store(dbs["b"]), "SELECT count(*) FROM audit") == [(0,)]
    assert list(cwd.iterdir()) == [], "nothing written where the dashboard runs"
    st.cache_data.clear()
    page = fresh_page().switch_page("views/audit.py").run()
    assert not page.exception, [e.message for e in page.exception]
    table = table_with(page, "Actor")  # the one line per action (AppTest gives tables no key)
    shown_rows = list(zip(table["Actor"], table["Outcome"]))
    assert shown_rows == [("unauthenticated:ana", "refused")], shown_rows


def test_a_session_ends_when_it_expires(operator_env):
    operator_env["monkeypatch"].setenv("JETWATCH_SESSION_TTL", "1s")
    at = login(fresh_page())
    assert signed_in(at)
    wait_until(lambda: not signed_in(at.run()), timeout=10, message="the session expired")
    assert "session expired" in sidebar_text(at)


def test_changing_the_identities_file_ends_every_session(operator_env):
    from jetwatch.dashboard import identities

    at = login(fresh_page())
    assert signed_in(at)
    identities.add(operator_env["file"], "bob", "a brand new password")  # bob's password rotated
    at.run()
    assert not signed_in(at) and "identities changed" in sidebar_text(at)


def test_sign_out_ends_the_session(operator_env):
    at = login(fresh_page())
    at.button(key="op_lock").click().run()
    assert not signed_in(at)
    assert any(b.key == "op_enable" for b in at.sidebar.button)


def test_a_non_loopback_address_without_identities_is_read_only_and_says_so(operator_env):
    from jetwatch.core.settings import Settings
    from jetwatch.dashboard.gate import read_only_reason

    operator_env["monkeypatch"].delenv("JETWATCH_OPERATORS_FILE")
    operator_env["monkeypatch"].setenv("JETWATCH_ADDRESS", "0.0.0.0")
    at = fresh_page()
    assert "Read-only (listening on 0.0.0.0" in sidebar_text(at)
    assert not any(b.key == "op_enable" for b in at.sidebar.button)
    assert read_only_reason(Settings({"address": "0.0.0.0"})).startswith("Read-only (listening on 0.0.0.0")


# --- the real server: sessions in a browser, foreign hosts refused ---------------------------


def serve(tmp, **settings: str):
    """`jetwatch dashboard` on a free loopback port with no store yet; yields its port, then stops it."""
    import contextlib
    import urllib.request

    from jetwatch.core.embedded_server import free_port

    @contextlib.contextmanager
    def running():
        port = free_port()
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("JETWATCH_")},
               "JETWATCH_DB": str(tmp / "jetwatch.duckdb"), **{f"JETWATCH_{k.upper()}": v for k, v in settings.items()}}
        proc = subprocess.Popen([sys.executable, "-m", "jetwatch.cli", "dashboard", "--port", str(port)], env=env,
                                stdout=open(tmp / "dashboard.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115 (the child's)

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False

        try:
            wait_until(healthy, timeout=60, message="dashboard health endpoint")
            yield port
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)

    return running()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The dashboard with one operator (ana) in an identities file."""
    tmp = tmp_path_factory.mktemp("served")
    path = operators_file(tmp, "ana")
    with serve(tmp, operators_file=path) as port:
        yield {"port": port, "base": f"http://127.0.0.1:{port}", "file": path}


def ws_handshake(port: int, host: str, origin: str | None) -> str:
    """The status line a raw WebSocket upgrade to Streamlit's session stream gets."""
    import base64
    import socket

    lines = ["GET /_stcore/stream HTTP/1.1", f"Host: {host}", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}", "Sec-WebSocket-Version: 13",
             "Sec-WebSocket-Protocol: streamlit"] + ([f"Origin: {origin}"] if origin else [])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        return sock.recv(4096).decode("latin-1").split("\r\n")[0]


def http_status(port: int, host: str, origin: str | None = None) -> int:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/", headers={"Host": host, **({"Origin": origin} if origin else {})})
    status = conn.getresponse().status
    conn.close()
    return status


def test_dns_rebinding_a_foreign_host_or_origin_gets_no_session_and_no_page(served):
    port = served["port"]
    assert ws_handshake(port, f"127.0.0.1:{port}", f"http://127.0.0.1:{port}").startswith("HTTP/1.1 101")
    assert ws_handshake(port, f"localhost:{port}", None).startswith("HTTP/1.1 101")
    assert ws_handshake(port, f"evil.example:{port}", f"http://evil.example:{port}").startswith("HTTP/1.1 403")
    assert ws_handshake(port, f"127.0.0.1:{port}", "http://evil.example").startswith("HTTP/1.1 403")
    # A page served on another port of this machine (any local dev server) is another origin.
    for origin in (f"http://127.0.0.1:{port + 1}", f"http://localhost:{port - 1}", "http://127.0.0.1"):
        assert ws_handshake(port, f"127.0.0.1:{port}", origin).startswith("HTTP/1.1 403"), origin
        assert http_status(port, f"127.0.0.1:{port}", origin) == 403, origin
    assert http_status(port, f"127.0.0.1:{port}") == 200
    assert http_status(port, f"evil.example:{port}") == 403
    assert http_status(port, f"127.0.0.1:{port}", "http://evil.example") == 403


@pytest.mark.browser
def test_a_session_survives_a_reload_and_a_deep_link_in_a_new_tab_and_ends_on_sign_out(served):
    from playwright.sync_api import sync_playwright

    from tests.browser import launch_chromium

    base = served["base"]
    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            context = browser.new_context()
            page = context.new_page()
            page.goto(base + "/", wait_until="commit")
            page.get_by_label("Operator name").fill("ana")
            page.get_by_label("Password", exact=True).fill(OPERATOR_PASSWORD)
            page.get_by_role("button", name="Sign in").click()
            page.get_by_text("signed in as ana").wait_for(timeout=30_000)

            def session_cookie() -> dict | None:
                return next((c for c in context.cookies() if c["name"] == "jetwatch_session" and c["value"]), None)

            wait_until(session_cookie, timeout=20, message="the session cookie")
            cookie = session_cookie()
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"

            page.reload()
            page.get_by_text("signed in as ana").wait_for(timeout=30_000)
            tab = context.new_page()
            tab.goto(base + "/consumer?stream=ORDERS&consumer=fulfilment", wait_until="commit")
            tab.get_by_text("signed in as ana").wait_for(timeout=30_000)

            tab.get_by_role("button", name="Sign out").click()
            tab.get_by_role("button", name="Sign in").wait_for(timeout=30_000)
            wait_until(lambda: session_cookie() is None, timeout=20, message="the cookie cleared")
            # The first tab, untouched, says so by itself within a refresh: no "signed in" left showing.
            page.get_by_role("button", name="Sign in").wait_for(timeout=30_000)
            assert page.get_by_text("signed in as ana").count() == 0
            page.reload()
            page.get_by_role("button", name="Sign in").wait_for(timeout=30_000)
            assert page.get_by_text("signed in as ana").count() == 0

            # A copy of the signed-out cookie (say, from a shared machine) opens no session either.
            replay = browser.new_context()
            replay.add_cookies([{k: cookie[k] for k in ("name", "value", "domain", "path")}])
            again = replay.new_page()
            again.goto(base + "/", wait_until="commit")
            again.get_by_role("button", name="Sign in").wait_for(timeout=30_000)
            assert again.get_by_text("signed in as ana").count() == 0
        finally:
            browser.close()


@pytest.mark.browser
def test_one_address_guessing_passwords_locks_out_itself_not_the_operators_elsewhere(tmp_path):
    """Sign-ins come from two addresses through a reverse proxy on this host (which says each in
    X-Forwarded-For, as nginx does for the client it serves; one proxy per address here): one guesses ana's password over two sessions, as many times as the
    per-address limit (10) allows. Twenty such guesses used to trip the dashboard-wide limit, after
    which nobody, ana included, could sign in for 5 minutes. Now the address is refused after its 10
    failures (in a fresh session too, so guessing on from it adds no failure and can never reach
    the dashboard-wide limit), ana signs in from hers, and the throttle is audited with the
    guessing address. (Guesses past the tenth are refused unchecked and counted nowhere: they would
    make the run slower, not the check stronger; the limits' arithmetic is
    test_the_sign_in_limits_per_session_per_address_and_for_the_dashboard's.)"""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import Page, sync_playwright

    from tests.browser import launch_chromium
    from tests.loopback import proxied

    path = operators_file(tmp_path, "ana")
    Store(tmp_path / "jetwatch.duckdb").migrate()  # an empty store, for the audit rows

    def attempt(page: Page, password: str) -> None:
        """Sign in once on this page: until the run that checks it clears the password field (a
        click that lands while the page is still running is not seen, and is given again)."""
        page.get_by_label("Operator name").fill("ana")
        field = page.get_by_label("Password", exact=True)
        field.fill(password)
        def handled() -> bool:
            try:
                return field.input_value(timeout=500) == ""
            except PlaywrightError:
                return field.count() == 0  # the field gone: signed in

        for _ in range(10):
            page.get_by_role("button", name="Sign in").click()
            try:
                wait_until(handled, timeout=5, message="the sign-in handled")
                return
            except AssertionError:
                continue
        raise AssertionError("the sign-in was never handled")

    def answer(page: Page) -> str:
        """The sidebar's answer to a page's only sign-in: its error, or who is signed in."""
        said = page.get_by_text(re.compile("wrong password|too many failed|signed in as ana"))
        said.first.wait_for(timeout=30_000)
        return said.first.inner_text()

    with serve(tmp_path, operators_file=path) as port, sync_playwright() as p, \
            proxied(port, {"X-Forwarded-For": "203.0.113.7"}) as guessing, \
            proxied(port, {"X-Forwarded-For": "198.51.100.9"}) as elsewhere:
        browser = launch_chromium(p)
        try:
            guesser = browser.new_context()
            for session in range(2):  # a new session (page) every five guesses: the per-session limit is 5
                page = guesser.new_page()
                page.goto(f"http://127.0.0.1:{guessing.port}/", wait_until="commit")
                for guess in range(5):
                    attempt(page, f"guess {session}.{guess}")
                page.close()
            operator = browser.new_context()
            page = operator.new_page()
            page.goto(f"http://127.0.0.1:{elsewhere.port}/", wait_until="commit")
            attempt(page, OPERATOR_PASSWORD)
            assert answer(page).startswith("signed in as ana")

            same = guesser.new_page()  # a new session, the right password, the guessing address: not even checked
            same.goto(f"http://127.0.0.1:{guessing.port}/", wait_until="commit")
            attempt(same, OPERATOR_PASSWORD)
            assert answer(same).startswith("too many failed sign-ins from your address (203.0.113.7): wait ")
        finally:
            browser.close()
    audit = rows(Store(tmp_path / "jetwatch.duckdb"), "SELECT actor, outcome, parameters FROM audit ORDER BY seq")
    assert audit and {(a, o) for a, o, _ in audit} == {("unauthenticated:ana", "refused")}, audit
    assert {json.loads(p)["source"] for _, _, p in audit} == {"203.0.113.7"}, audit


def test_the_sign_in_limits_per_session_per_address_and_for_the_dashboard():
    from jetwatch.dashboard.identities import Throttle, source_of

    t = Throttle(per_session=5, per_source=10, overall=20, window_s=300)
    for i in range(10):  # one address, a new session every five
        assert t.blocked(f"s{i // 5}", "203.0.113.7", now=i) is None
        t.failed(f"s{i // 5}", "203.0.113.7", now=i)
    assert t.blocked("s9", "203.0.113.7", now=10).startswith("too many failed sign-ins from your address")
    assert t.blocked("s9", "198.51.100.9", now=10) is None
    for i in range(10):  # two more addresses: the dashboard-wide limit (20) trips
        t.failed(f"x{i}", f"192.0.2.{i // 5}", now=20 + i)
    assert t.blocked("s9", "192.0.2.0", now=31).startswith("too many failed sign-ins on this dashboard, from several")
    assert t.blocked("s9", "198.51.100.9", now=31) is None  # an address with no failure may still try
    for i in range(40):  # many addresses, one guess each: past the ceiling (60) everyone waits
        t.failed(f"y{i}", f"10.0.{i}.1", now=40 + i)
    assert t.blocked("s9", "198.51.100.9", now=81).startswith("too many failed sign-ins on this dashboard, from many")
    assert t.blocked("s9", "198.51.100.9", now=81 + 300) is None  # the window passes
    assert source_of(None) == "this host"
    assert source_of("2001:db8:1:2:aaaa::1") == source_of("2001:db8:1:2:bbbb::2") == "2001:db8:1:2::/64"


def test_operator_add_writes_a_salted_scrypt_line_from_stdin_and_refuses_short_passwords(tmp_path):
    from jetwatch.dashboard import identities

    path = tmp_path / "operators"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("JETWATCH_")}, "JETWATCH_OPERATORS_FILE": str(path)}
    cmd = [sys.executable, "-m", "jetwatch.cli", "operator", "add"]
    done = subprocess.run(cmd + ["ana"], input="a long enough password\n", env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    line = [ln for ln in path.read_text().splitlines() if ln.startswith("ana:")]
    assert len(line) == 1 and line[0].startswith("ana:scrypt:16384:8:1:")
    assert "a long enough password" not in path.read_text()
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert identities.verify(path, "ana", "a long enough password")
    assert not identities.verify(path, "ana", "a long enough passwort")

    again = subprocess.run(cmd + ["ana"], input="a long enough password\n", env=env, capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 0
    assert path.read_text().count("ana:") == 1
    assert line[0] not in path.read_text()  # a fresh salt: the same password hashes anew

    short = subprocess.run(cmd + ["bob"], input="short\n", env=env, capture_output=True, text=True, timeout=60)
    assert short.returncode != 0 and "too short" in short.stderr
    bad = subprocess.run(cmd + ["\u202emallory"], input="a long enough password\n", env=env, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode != 0 and "not usable" in bad.stderr
    assert "bob" not in path.read_text() and "mallory" not in path.read_text()


def test_the_selection_follows_the_consumer_through_reorders_refreshes_and_a_click_on_a_table_since_replaced():
    from jetwatch.dashboard import selection

    a, b, c = (None, "ORDERS", "fulfilment"), (None, "EVENTS", "notify"), ("APP", "EVENTS", "notify")
    state: dict = {}
    first = [b, a]
    w1 = selection.widget_key(first)
    selection.follow(state, w1, first)
    state[w1] = {"selection": {"rows": [1], "columns": []}}
    assert selection.follow(state, w1, first) and state[selection.SELECTED] == a

    resorted = [a, b, c]  # a verdict changed: new order, new table, no ticked row in it
    w2 = selection.widget_key(resorted)
    assert w2 != w1
    assert not selection.follow(state, w2, resorted) and state[selection.SELECTED] == a

    # A click in the table on screen, while a refresh replaced it before the rerun: the row is
    # looked up in the list that table showed, not in the new one.
    state[w2] = {"selection": {"rows": [2], "columns": []}}
    refreshed = [c, b, a]
    w3 = selection.widget_key(refreshed)
    assert selection.follow(state, w3, refreshed) and state[selection.SELECTED] == c

    state[w3] = {"selection": {"rows": [0], "columns": []}}  # ticks c in the table on screen
    selection.follow(state, w3, refreshed)
    state[w3] = {"selection": {"rows": [], "columns": []}}  # and un-ticks it there
    assert selection.follow(state, w3, refreshed) and state[selection.SELECTED] is None

    # A search's run made a new table and a refresh ran behind it before the browser drew it: a
    # click in the table still on screen, two runs back, is looked up in that table's list, once.
    searched = [a]
    w4 = selection.widget_key(searched)
    assert not selection.follow(state, w4, searched)  # the search's run
    assert not selection.follow(state, w4, searched)  # the refresh behind it
    state[w3] = {"selection": {"rows": [1], "columns": []}}  # b, in the table the user still saw
    assert selection.follow(state, w4, searched) and state[selection.SELECTED] == b
    assert not selection.follow(state, w4, searched) and state[selection.SELECTED] == b


def test_the_host_check_reads_host_and_origin_strictly():
    from jetwatch.core.settings import Settings
    from jetwatch.dashboard.gate import allowed_hosts, foreign

    allowed = allowed_hosts(Settings({"address": "127.0.0.1", "allowed_hosts": ("jetwatch.example.com",)}))
    ok = [{b"host": b"127.0.0.1:8501"}, {b"host": b"[::1]:8501"}, {b"host": b"localhost"},
          {b"host": b"JetWatch.Example.com.", b"origin": b"https://jetwatch.example.com"}]
    refused = [{}, {b"host": b"evil.example"}, {b"host": b"127.0.0.1.evil.example"},
               {b"host": b"evil.example@127.0.0.1"}, {b"host": b"127.0.0.1:notaport"},
               {b"host": b"127.0.0.1", b"origin": b"null"}, {b"host": b"127.0.0.1", b"origin": b"http://evil.example"}]
    assert [foreign(h, allowed) for h in ok] == [None] * len(ok)
    assert all(foreign(h, allowed) for h in refused)
    assert "jetwatch.example.com" not in allowed_hosts(Settings({"address": "10.1.2.3"}))
    assert "10.1.2.3" in allowed_hosts(Settings({"address": "10.1.2.3"}))


def test_an_origin_on_another_port_of_an_allowed_host_is_foreign():
    """Another port is another origin: a page from any other local web server (localhost:3000)
    would otherwise open a session, and SameSite cookies do not tell ports apart."""
    from jetwatch.core.settings import Settings
    from jetwatch.dashboard.gate import allowed_hosts, foreign

    allowed = allowed_hosts(Settings({"address": "127.0.0.1", "allowed_hosts": ("jetwatch.example.com",)}))
    same = [(b"127.0.0.1:8501", b"http://127.0.0.1:8501"), (b"localhost:8501", b"http://LOCALHOST:8501"),
            (b"[::1]:8501", b"http://[::1]:8501"),
            # Behind a TLS proxy (Host $host, no port): the Origin's scheme says which port it came to.
            (b"jetwatch.example.com", b"https://jetwatch.example.com"),
            (b"jetwatch.example.com", b"https://jetwatch.example.com:443"),
            (b"jetwatch.example.com:443", b"https://jetwatch.example.com"),
            (b"jetwatch.example.com:8443", b"https://jetwatch.example.com:8443"),
            (b"localhost", b"http://localhost:80")]
    other = [(b"127.0.0.1:8501", b"http://127.0.0.1:3000"), (b"127.0.0.1:8501", b"http://localhost:8080"),
             (b"127.0.0.1:8501", b"http://127.0.0.1"), (b"localhost", b"http://localhost:8501"),
             (b"jetwatch.example.com", b"https://jetwatch.example.com:8443"),
             (b"jetwatch.example.com", b"http://jetwatch.example.com:443"),
             (b"127.0.0.1:8501", b"chrome-extension://127.0.0.1:8501")]
    assert [foreign({b"host": h, b"origin": o}, allowed) for h, o in same] == [None] * len(same)
    assert [foreign({b"host": h, b"origin": o}, allowed) for h, o in other] == ["Origin"] * len(other)


@pytest.mark.browser
def test_behind_a_trusted_proxy_the_operator_is_the_name_its_header_carries_and_nothing_else(tmp_path):
    """The dashboard behind a reverse proxy that signs users in (it sets X-Forwarded-User, and
    drops any copy the browser sent): the name it carries is the operator; a missing, empty or
    unusable name signs nobody in. The browser offers its own X-Forwarded-User each time, which
    the proxy must drop (as a real one does) and the dashboard must never see."""
    from playwright.sync_api import sync_playwright

    from tests.browser import launch_chromium
    from tests.loopback import proxied

    with serve(tmp_path, trusted_user_header="X-Forwarded-User") as port, sync_playwright() as p, \
            proxied(port) as proxy:
        browser = launch_chromium(p)
        try:
            # One page, opened again behind each of the proxy's answers: a fresh browser context for
            # each fetched and compiled the app's scripts anew, which a loaded machine took over 30 s to do.
            context = browser.new_context(extra_http_headers={"X-Forwarded-User": "mallory"})
            tab = context.new_page()

            def page_with(headers: dict[str, str | None]):
                proxy.set_headers(headers)
                tab.goto(f"http://127.0.0.1:{proxy.port}/", wait_until="commit")
                tab.get_by_text("Operator actions").wait_for(timeout=30_000)
                return tab

            page_with({"X-Forwarded-User": "carol"}).get_by_text("signed in by your proxy as carol").wait_for(
                timeout=30_000)
            for headers in ({"X-Forwarded-User": None}, {"X-Forwarded-User": "carol<img src=x>"},
                            {"X-Forwarded-User": ""}):
                page = page_with(headers)
                page.get_by_text("Sign in through the proxy").wait_for(timeout=30_000)
                assert page.get_by_text("signed in by your proxy").count() == 0
        finally:
            browser.close()


def test_the_cookie_handoff_is_offered_on_every_run_until_the_browser_trades_it(operator_env):
    """The page hands the browser a one-time code to trade for the session cookie. A refresh that
    comes before a slow browser ran the frame's script must not take the offer away (the cookie
    was then never set, and a reload signed the operator out); once traded, it is gone."""
    from jetwatch.dashboard import identities
    from jetwatch.dashboard.operator import HANDOFF

    at = login(fresh_page(), name="ana")
    code = at.session_state[HANDOFF]
    at.run()  # a refresh, the browser not heard from
    assert at.session_state[HANDOFF] == code and identities.handoff_waiting(code)
    assert identities.redeem(code) is not None  # the browser's POST /_jetwatch/session
    at.run()
    assert HANDOFF not in at.session_state and signed_in(at)


def test_the_call_that_clears_the_cookie_is_drawn_on_every_run_until_the_browser_makes_it(operator_env):
    """Sign out asks the browser to clear its cookie (a frame whose script POSTs to the logout
    route). A refresh that comes before a slow browser ran the frame's script must not take the
    call away (the browser then kept the revoked cookie); once the route has it, it is gone."""
    from jetwatch.dashboard import identities
    from jetwatch.dashboard.gate import LOGOUT_PATH
    from jetwatch.dashboard.operator import SIGNED_OUT

    def logout_frames(at: AppTest) -> list[str]:
        return [str(f.proto) for f in at.get("iframe") if LOGOUT_PATH in str(f.proto)]

    at = login(fresh_page(), name="ana")
    at.sidebar.button(key="op_lock").click().run()
    code = at.session_state[SIGNED_OUT]
    assert not signed_in(at) and len(logout_frames(at)) == 1 and code in logout_frames(at)[0]
    at.run()  # a refresh, the browser not heard from
    assert len(logout_frames(at)) == 1 and identities.logout_waiting(code)
    identities.logout_done(code)  # what the route does with the code the browser POSTs
    at.run()
    assert logout_frames(at) == [] and not signed_in(at)
