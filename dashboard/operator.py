"""Operator actions in the dashboard: who may act, the confirmation dialog, the results.

Read-only unless operator identities are configured (a file of names and scrypt hashes, or a
trusted proxy header); the audited name is the signed-in one, never typed beside an action.
Buttons only *request* an action (session state); the dialog names the exact target, and only
its Confirm runs the action, re-checking the operator first, so nothing acts without both.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
import streamlit.components.v1 as components

from jetwatch.actions import catalog
from jetwatch.actions import operations as ops
from jetwatch.actions.accounts import perform_on_account
from jetwatch.actions.audit import AuditUnavailable, begin, finish
from jetwatch.actions.drains import drains_for, spawn_detached
from jetwatch.core.connection import ConnectError
from jetwatch.core.jsapi import JetStreamAPI, JetStreamAPIError, NoReply
from jetwatch.core.jsinfo import ConsumerInfo
from jetwatch.core.settings import Settings
from jetwatch.core.urls import shown_servers
from jetwatch.dashboard import data, gate, identities, stores, ui
from jetwatch.dashboard.text import pin_holder, visible_value
from jetwatch.dashboard.ui import md
from jetwatch.store.database import Store, StoreError

log = logging.getLogger("jetwatch.dashboard")

PENDING = "pending_action"
RESULT = "action_result"  # the latest result (the Consumer page follows its new pin)
RESULTS = "action_results"  # (cluster, stream, consumer) -> the latest result for that consumer: its banner
# A result's banner (and a drain's progress box) stays this long after its action ended, then goes:
# by then it is history, which the Audit page keeps.
BANNER_KEPT = dt.timedelta(minutes=10)
DRAIN_ENDED = ("done", "failed", "timed_out", "interrupted")
SHOWN_AT = "shown_at"  # when a result without its own time (a refusal) was first shown
FRESH = "action_requested"  # set by a button in a fragment: the page reruns whole to open the dialog
PIN_MOVED = "action_pin_moved"  # why the pending unpin was not sent and is asked again


SESSION = "operator_session"  # identities.Session of the signed-in operator
HANDOFF = "operator_handoff"  # one-time code the browser trades for the session cookie
SIGNED_OUT = "operator_signed_out"  # set by Sign out: the code of the browser's call that clears its cookie
ENDED = "operator_ended"  # why the last session ended, shown once
SHOWN = "operator_shown"  # who the sidebar last showed signed in (None: nobody)


def _session_from_cookie(operators_file: str) -> identities.Session | None:
    try:
        cookies = st.context.cookies
    except Exception:  # no browser behind this run (bare script)
        return None
    return identities.parse(operators_file, cookies.get(gate.COOKIE))


def _header_name(s: Settings) -> str | None:
    if not s.trusted_user_header:
        return None
    try:
        name = st.context.headers.get(s.trusted_user_header)
    except Exception:
        return None
    return name if name and identities.NAME.match(name) else None


def operator(s: Settings) -> str | None:
    """The signed-in operator's name when actions are enabled for this session, else None.

    Checked on every run, not only at sign-in: a session ends when it expires, when the
    identities file changes, on Sign out, or when the name is removed from the file."""
    if gate.read_only_reason(s):
        return None
    if s.operators_file:
        session = st.session_state.get(SESSION)
        from_cookie = session is None
        if from_cookie and not st.session_state.get(SIGNED_OUT):
            session = _session_from_cookie(s.operators_file)
        if session is not None:
            why = identities.check(s.operators_file, session)
            if why is None:
                st.session_state[SESSION] = session
                return session.name
            st.session_state.pop(SESSION, None)
            if not from_cookie or why != "you signed out":
                st.session_state[ENDED] = why
    return _header_name(s)


def _session_key() -> str:
    """This browser session's id, for the per-session sign-in limit."""
    key = st.session_state.get("operator_throttle_key")
    if key is None:
        key = st.session_state["operator_throttle_key"] = uuid.uuid4().hex
    return key


def _source() -> str:
    """Where this browser's sign-ins come from, for the per-address limit: the client's address as
    the web server reports it (behind a proxy on this host, the one the proxy sends in
    X-Forwarded-For); "this host" for a browser on the dashboard's own machine."""
    try:
        address = st.context.ip_address
    except Exception:  # no browser behind this run (bare script)
        address = None
    return identities.source_of(address if isinstance(address, str) else None)


def _audit_throttle(s: Settings, name: str, why: str, source: str) -> None:
    """A throttle that starts is an audit event (through the one audit write path), in the store
    the dashboard's own events go to (stores.audit_path): one the Audit page reads, whether the
    dashboard reads --db or a fleet of --dbs. A store that cannot take it is said in the log; the
    throttle holds all the same."""
    result = ops.ActionResult("sign-in", ops.Target(None, "(dashboard)", "(sign-in)"), False,
                              f"sign-in throttled: {why}", None, {"refused": True})
    try:
        path = stores.audit_path(s)
        ops.record(Store(path, lock_timeout=s.lock_timeout), result, f"unauthenticated:{name[:64]}", "dashboard",
                   {"session": _session_key()[:8], "source": source})
    except StoreError as exc:
        result.message += f" (its audit row could not be written: {exc})"
        result.details["audit_failed"] = True
    if result.details.get("audit_failed"):
        log.error("%s; the throttle holds, but the Audit page will not show it: check that the dashboard can "
                  "write its first store", result.message)


def _login(s: Settings, operators_file: str) -> None:
    name = (st.session_state.get("op_name") or "").strip()
    given = st.session_state.get("op_secret") or ""
    st.session_state["op_secret"] = ""
    key, source = _session_key(), _source()
    blocked = identities.THROTTLE.blocked(key, source)
    if blocked:
        st.session_state["op_error"] = blocked
        return
    try:
        identities.read(operators_file)
    except (OSError, identities.IdentityError) as exc:
        # Said in the log, with the file's path and the line at fault; the page, which anyone may
        # see, says only that sign-in cannot work, never "wrong password" for a file at fault.
        log.error("sign-in refused: the operators file cannot be read: %s", exc)
        st.session_state["op_error"] = ("Sign-in is unavailable: the operators file cannot be read (the dashboard's "
                                        "log says why). Fix it with `jetwatch operator add`, or restore it.")
        return
    if not identities.verify(operators_file, name, given):
        identities.THROTTLE.failed(key, source)
        now_blocked = identities.THROTTLE.blocked(key, source)
        if now_blocked:
            _audit_throttle(s, name, now_blocked, source)
        st.session_state["op_error"] = now_blocked or "Unknown name or wrong password: actions stay off."
        return
    session, token = identities.issue(operators_file, name, s.session_ttl)
    st.session_state[SESSION] = session
    st.session_state[HANDOFF] = identities.handoff(token, s.session_ttl)
    for k in ("op_error", ENDED, SIGNED_OUT):
        st.session_state.pop(k, None)


def _logout(s: Settings) -> None:
    session = st.session_state.pop(SESSION, None)
    if session is not None:
        identities.revoke(session)
    st.session_state[SIGNED_OUT] = identities.logout_code()


def _browser_call(path: str, body: str = "") -> None:
    """A same-origin POST from the browser, so the server's reply can set or clear the HttpOnly cookie.
    (A component frame shares the page's origin; its script runs once per render.)"""
    components.html(f"<script>fetch(new URL({json.dumps(path)}, window.parent.location.href), {{method: 'POST', "
                    f"body: {json.dumps(body)}, credentials: 'same-origin'}});</script>", height=0)


def sidebar(s: Settings) -> None:
    with st.sidebar:
        st.markdown("**Operator actions**")
        reason = gate.read_only_reason(s)
        if reason:
            st.caption(reason)  # our own words and the configured address and path
            return

        # Re-read every refresh: a session ended elsewhere (Sign out in another tab, expiry, the
        # name removed from the file) shows here without a click, and the page's actions follow.
        @st.fragment(run_every=s.refresh)
        def status() -> None:
            who = operator(s)
            if st.session_state.get(SHOWN, who) != who:
                st.session_state[SHOWN] = who
                st.rerun()  # the whole page: its action buttons follow who is signed in
            st.session_state[SHOWN] = who
            _status(s, who)

        status()


def _status(s: Settings, who: str | None) -> None:
    # Drawn on every run until the browser has made the call (as the sign-in's handoff below): a
    # refresh that came before a slow browser ran the frame's script would otherwise remove it,
    # and the browser would keep the (revoked) cookie.
    code = st.session_state.get(SIGNED_OUT)
    if isinstance(code, str) and identities.logout_waiting(code):
        _browser_call(gate.LOGOUT_PATH, code)
    if who:
        session = st.session_state.get(SESSION)
        if session is None:
            st.caption(f"signed in by your proxy as {md(who)}")
            return
        # Drawn on every run until the browser has traded it: a refresh of this fragment that
        # came before a slow browser ran the frame's script would otherwise remove the frame, and
        # the cookie would never be set (a reload then signs out).
        code = st.session_state.get(HANDOFF)
        if code and identities.handoff_waiting(code):
            _browser_call(gate.SESSION_PATH, code)
        elif code:
            st.session_state.pop(HANDOFF)
        until = dt.datetime.fromtimestamp(session.expires, dt.UTC).strftime("%H:%M UTC")
        st.caption(f"signed in as {md(who)} until {until}")
        st.button("Sign out", key="op_lock", on_click=_logout, args=(s,))
        return
    if st.session_state.get(ENDED):
        st.info(st.session_state.pop(ENDED))  # our own words
    if not s.operators_file:
        st.caption("Sign in through the proxy in front of this dashboard to enable actions.")
        return
    st.text_input("Operator name", key="op_name")
    st.text_input("Password", key="op_secret", type="password")
    st.button("Sign in", key="op_enable", on_click=_login, args=(s, s.operators_file))
    if st.session_state.get("op_error"):
        st.error(st.session_state["op_error"])  # our own words


def request(action: str, target: ops.Target, cluster: str | None = None, **params: Any) -> None:
    """on_click of an action button: remember what was asked (and in which cluster), confirm it
    on the next run."""
    st.session_state[PENDING] = {"action": action, "target": target, "params": params, "cluster": cluster}
    st.session_state[FRESH] = True
    st.session_state.pop(PIN_MOVED, None)


def _describe(pending: dict[str, Any], holders: dict[str, tuple[str, str]] | None = None) -> str:
    """The question the dialog asks; an unpin's names the pin it drops and who holds it (`holders`:
    pin id -> (announced name, verification), in the Consumer page's words)."""
    text = catalog.confirmation(pending["action"], pending["target"], pending["params"])
    if pending["action"] == "unpin":
        pin = pending["params"].get("expect_pin")
        holder = pin_holder(pin, *(holders or {}).get(pin, (None, None))) if pin else ""
        if pending["params"].get("any_holder"):
            text += ": drops whichever pin the group has when it is sent" + (f" (pin {pin} when you looked)" if pin else "")
        else:
            text += f": drops pin {pin}, held by {holder}" if pin else ": nothing was pinned when you looked"
    return text


def _holders(store: Store, pending: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Who holds the pin an unpin would drop, as announced (none known when the store cannot say)."""
    pin = pending["params"].get("expect_pin") if pending["action"] == "unpin" else None
    try:
        return data.pin_holders_of(store, [pin]) if pin else {}
    except StoreError:
        return {}


async def _pin_moved(api: JetStreamAPI, pending: dict[str, Any]) -> ops.ActionResult | None:
    """Unpin drops whatever is pinned *now*; the operator confirmed one pin id. Compare against
    fresh consumer info just before sending, and refuse (to ask again) when the pin moved; unless
    the operator confirmed dropping whoever holds it when sent (a pin that moves every few
    seconds is never the one last looked at)."""
    if pending["params"].get("any_holder"):
        return None
    target = pending["target"]
    try:
        info = ConsumerInfo.of(await api.consumer_info(target.stream, target.consumer))
    except (JetStreamAPIError, NoReply):
        return None  # the action's own check reports the error in its words
    _, now = info.pinned()
    expected = pending["params"].get("expect_pin")
    if now == expected:
        return None
    return ops.ActionResult(
        "unpin", target, False,
        f"not sent: the pin moved since you looked. You confirmed dropping {expected or 'no pin'}; "
        f"the consumer now has {now or 'no pin'}. Confirm again to drop {now or 'nothing'}, or cancel.",
        None, {"refused": True, "pin_moved": True, "pin_now": now})


def execute(s: Settings, store: Store, pending: dict[str, Any]) -> ops.ActionResult:
    """Run a confirmed action. Refuses unless this session is an enabled operator; audits an intent
    before sending and the outcome after (see actions/audit.py); never raises for a store error."""
    who = operator(s)
    target = pending["target"]
    if who is None:
        return ops.ActionResult(pending["action"], target, False, "refused: operator actions are not enabled",
                                None, {"refused": True})
    try:
        if pending["action"] == "drain":
            p = pending["params"]
            plan = ops.DrainPlan(p["then"], float(p["timeout_s"]), p.get("stay_until"))
            drain_id = spawn_detached(s, store, target, plan, who, Path(s.data_dir) / "logs")
            return ops.ActionResult("drain", target, True,
                                    f"drain {short_id(drain_id)} started; it runs on if this page closes", None,
                                    {"drain_id": drain_id})
        action_id = begin(store, pending["action"], target, who, "dashboard", pending["params"])
    except AuditUnavailable as exc:
        return ops.ActionResult(pending["action"], target, False, str(exc), None, {"refused": True})
    if catalog.action(pending["action"]).on == "store":  # a silence: kept in this cluster's store
        result = catalog.perform_in_store(store, pending["action"], target, pending["params"], who, action_id)
        finish(store, action_id, result, who, "dashboard", pending["params"])
        result.details["at"] = ops.utcnow()
        if result.ok:  # the fleet is read once per collector cycle: a silence shows on every page at once
            ui.cached_fleet_clear()
        return result
    try:
        result = asyncio.run(perform_on_account(
            s, pending["action"], target, pending["params"], client_name="jetwatch-dashboard-action",
            precheck=(lambda api: _pin_moved(api, pending)) if pending["action"] == "unpin" else None))
        dropped = result.details.get("unpinned_id")
        if result.ok and pending["action"] == "unpin" and pending["params"].get("any_holder"):
            result.message += " (as you confirmed: whoever held it when sent)"
        elif result.ok and pending["action"] == "unpin" and dropped != pending["params"].get("expect_pin"):
            result.message += f" (the pin moved in the instant before sending: {dropped} was dropped)"
    except ConnectError as exc:
        result = ops.ActionResult(pending["action"], target, False, str(exc), None)
    finish(store, action_id, result, who, "dashboard", pending["params"])
    if result.details.get("pin_moved"):
        return result  # nothing was sent: the dialog asks again, naming the new pin
    result.details["at"] = ops.utcnow()
    return result


def for_cluster(s: Settings, store: Store, cluster: str | None) -> tuple[Settings, Store]:
    """The settings and store an action on a consumer of `cluster` runs with: that cluster's server
    (--server-for, else what its collector reported) and its own store, which gets the audit rows."""
    if cluster is None:
        return s, store
    found = stores.identify(s)
    cs = stores.find(found, cluster)
    return stores.acting(s, cs, several=len(found) > 1), cs.store


def dialog(s: Settings, store: Store) -> None:
    """Open the confirmation while an action is pending (for the cluster it was asked in)."""
    pending = st.session_state.get(PENDING)
    if not pending:
        return
    try:
        s, store = for_cluster(s, store, pending.get("cluster"))
    except StoreError as exc:
        st.error(md(exc))
        st.session_state.pop(PENDING, None)
        return
    st.session_state.pop(FRESH, None)  # the dialog is open: no page needs to rerun for it

    @st.dialog("Confirm action")
    def confirm() -> None:
        note = st.session_state.get(PIN_MOVED)
        if note:
            st.warning(md(note))
        st.markdown("**" + md(_describe(pending, _holders(store, pending))) + "**")
        where = f"cluster {pending['cluster']}, " if pending.get("cluster") is not None else ""
        place = ("in its store (nothing is sent to the server)" if catalog.action(pending["action"]).on == "store"
                 else "on " + md(where + shown_servers(s.server)))
        st.caption(f"{place}, as {md(operator(s) or 'nobody')}")
        c1, c2 = st.columns(2)
        confirmed = c1.button("Confirm", key="action_confirm", type="primary")
        if note and pending["action"] == "unpin" and not pending["params"].get("any_holder") and c1.button(
                "Unpin whoever holds it", key="action_confirm_any",
                help="sends the unpin without comparing pins: drops whichever client is pinned when it is sent "
                     "(the audit keeps the pin it dropped)"):
            pending["params"]["any_holder"] = True
            confirmed = True
        if confirmed:
            result = execute(s, store, pending)
            if result.details.get("pin_moved"):  # ask again, about the pin there is now
                pending["params"]["expect_pin"] = result.details.get("pin_now")
                st.session_state[PENDING] = pending
                st.session_state[PIN_MOVED] = result.message
            else:
                st.session_state[RESULT] = result
                st.session_state.setdefault(RESULTS, {})[key_of(result.target, pending.get("cluster"))] = result
                st.session_state.pop(PENDING, None)
                st.session_state.pop(PIN_MOVED, None)
            st.rerun()
        if c2.button("Cancel", key="action_cancel"):
            st.session_state.pop(PENDING, None)
            st.session_state.pop(PIN_MOVED, None)
            st.rerun()

    confirm()


Key = tuple[str | None, str, str]


def key_of(target: ops.Target, cluster: str | None) -> Key:
    """A result's consumer, as banners match it: its cluster (the same names in two clusters are two
    consumers), stream and consumer (the account a result names is the one the server reported,
    which a page built from a deep link may not know yet)."""
    return (cluster, target.stream, target.consumer)


def result_for(target: ops.Target, cluster: str | None) -> ops.ActionResult | None:
    """The latest result of an action on this consumer of this cluster (until dismissed)."""
    return st.session_state.get(RESULTS, {}).get(key_of(target, cluster))


def short_id(drain_id: object) -> str:
    """A drain's id as a person reads it: its first 8 hex digits (the whole is on the Audit page)."""
    return str(drain_id)[:8]


def _drain_row(store: Store | None, result: ops.ActionResult) -> pd.Series | None:
    """The `drains` row of the drain a banner reports (None when there is none or it cannot be read)."""
    drain_id = result.details.get("drain_id")
    if store is None or not drain_id:
        return None
    try:
        drains = drains_for(store, result.target.stream, result.target.consumer)
    except StoreError:
        return None
    mine = drains[drains["drain_id"] == drain_id]
    return None if mine.empty else mine.iloc[0]


def _drain_ended(store: Store | None, result: ops.ActionResult) -> dt.datetime | None:
    """When a drain's process ended, from its row (None while it runs or when it cannot be read)."""
    row = _drain_row(store, result)
    return None if row is None or row["state"] not in DRAIN_ENDED else pd.Timestamp(row["updated_at"]).to_pydatetime()


def ended_at(store: Store | None, result: ops.ActionResult) -> dt.datetime | None:
    """When the action a banner reports ended: a drain when its process did, another action when its
    reply came (a refusal: when it was first shown)."""
    if result.action == "drain" and result.details.get("drain_id"):
        return _drain_ended(store, result)
    return result.details.get("at") or result.details.setdefault(SHOWN_AT, ops.utcnow())


def _drain_state(store: Store | None, result: ops.ActionResult) -> tuple[bool, str] | None:
    """A drain's state now (it runs in its own process after its banner appeared)."""
    d = _drain_row(store, result)
    if d is None:
        return None
    state = str(d["state"]).replace("_", " ")
    message = "" if d["message"] is None or pd.isna(d["message"]) else f": {d['message']}"
    return d["state"] not in ("failed", "timed_out", "interrupted"), f"now {state}{message}"


def banner_text(result: ops.ActionResult, final: tuple[bool, str] | None = None,
                cluster: str | None = None) -> tuple[bool, str]:
    """'<action> <stream> / <consumer> ([cluster …, ]account …): <what happened>', with a drain's state now."""
    t = result.target
    ok, said = (result.ok, result.message) if final is None else (final[0], f"{result.message}; {final[1]}")
    where = (f"cluster {cluster}, " if cluster is not None else "") + f"account {t.account or 'default'}"
    return ok, f"{result.action} {t.stream} / {t.consumer} ({where}): {said}"


def _dismiss(key: Key) -> None:
    dismissed = st.session_state.get(RESULTS, {}).pop(key, None)
    if dismissed is not None and st.session_state.get(RESULT) is dismissed:
        st.session_state.pop(RESULT, None)


def dismiss_key(action: str, key: Key) -> str:
    """The dismiss button's widget key: the result's key written out unambiguously (joined with
    "_", cluster "a_b" and stream "c" would meet cluster "a" and stream "b_c")."""
    return f"dismiss_{action}_{json.dumps([str(k) for k in key])}"


def show_result(by_cluster: Mapping[str | None, Store], target: ops.Target | None = None,
                cluster: str | None = None) -> None:
    """The result banners: on a consumer's page (`target` in `cluster`) only that consumer's; on the
    Fleet (no target), each with its target named, and its cluster when `by_cluster` (the stores
    shown, by cluster) holds several. A drain's banner follows the drain to its end in its cluster's
    store; each is dismissable."""
    results: dict[Key, ops.ActionResult] = st.session_state.get(RESULTS, {})
    now = ops.utcnow()
    for key, result in list(results.items()):
        ended = ended_at(by_cluster.get(key[0]), result)
        if ended is not None and now - ended > BANNER_KEPT:
            _dismiss(key)  # history now: the Audit page keeps it
            continue
        if target is not None and key != key_of(target, cluster):
            continue
        named = key[0] if len(by_cluster) > 1 else None
        ok, text = banner_text(result, _drain_state(by_cluster.get(key[0]), result), named)
        box, close = st.columns([12, 1])
        (box.success if ok else box.error)(md(text))
        close.button("✕", key=dismiss_key(result.action, key), help="dismiss",
                     on_click=_dismiss, args=(key,))
        if result.reply is not None:
            with box.expander("the server's reply"):
                st.json(visible_value(result.reply), expanded=False)


def new_pin_after(store: Store, result: ops.ActionResult) -> pd.DataFrame:
    """Pins of the target consumer recorded after the action (for the 'new pin' line)."""
    at = result.details.get("at") or ops.utcnow()
    since = at - dt.timedelta(seconds=2)
    t = result.target
    try:
        events = store.query("pin_events_range", {"since": since, "until": ops.utcnow() + dt.timedelta(minutes=1),
                                                  "account": t.account, "stream": t.stream, "consumer": t.consumer})
    except StoreError:
        return pd.DataFrame()
    return events[(events["stream"] == t.stream) & (events["consumer"] == t.consumer) & (events["event"] == "pinned")
                  & (pd.to_datetime(events["ts"], utc=True) >= pd.Timestamp(since))]


def drain_progress(store: Store, account: str | None, stream: str, consumer: str) -> None:
    try:
        drains = drains_for(store, stream, consumer)
        if account is not None:
            drains = drains[drains["account"].isna() | (drains["account"] == account)]
    except StoreError:
        return
    if drains.empty:
        return
    d = drains.iloc[0]
    if d["state"] in DRAIN_ENDED and ops.utcnow() - pd.Timestamp(d["updated_at"]).to_pydatetime() > BANNER_KEPT:
        return  # ended a while ago: history, on the Audit page
    start = int(d["ack_pending_start"]) if pd.notna(d["ack_pending_start"]) else 0
    now = int(d["ack_pending_now"]) if pd.notna(d["ack_pending_now"]) else None
    done = 1.0 if not start else max(0.0, min(1.0, 1 - (now if now is not None else start) / start))
    label = f"drain {md(short_id(d['drain_id']))} by {md(d['actor'])} (then {md(d['then_action'])}): {md(d['state'])}"
    if d["state"] == "draining":
        st.progress(done, text=f"{label}, {now if now is not None else '?'} of {start} in flight, {md(d['message'])}")
    else:
        (st.success if d["state"] == "done" else st.warning)(f"{label}: {md(d['message'])}")
