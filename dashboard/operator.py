"""Operator actions in the dashboard: the secret gate, the confirmation dialog, the results.

Read-only unless a secret is configured and the user enters it with a name for the audit log.
Buttons only *request* an action (session state); the dialog names the exact target, and only
its Confirm runs the action, re-checking the operator first, so nothing acts without both.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hmac
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from jetwatch.actions import catalog
from jetwatch.actions import operations as ops
from jetwatch.actions.drains import drains_for, spawn_detached
from jetwatch.dashboard.ui import md
from jetwatch.core.connection import ConnectError, connect
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.core.settings import Settings
from jetwatch.store.database import Store, StoreError

PENDING = "pending_action"
RESULT = "action_result"
OPERATOR = "operator"


def configured_secret(s: Settings) -> str | None:
    if s.operator_secret:
        return s.operator_secret
    if s.operator_secret_file:
        try:
            return Path(s.operator_secret_file).read_text().strip() or None
        except OSError:
            return None
    return None


def operator(s: Settings) -> str | None:
    """The operator's name when actions are enabled for this session, else None."""
    if configured_secret(s) is None:
        return None
    return st.session_state.get(OPERATOR)


def _login(secret: str) -> None:
    name = (st.session_state.get("op_name") or "").strip()
    given = st.session_state.get("op_secret") or ""
    if name and hmac.compare_digest(given.encode(), secret.encode()):
        st.session_state[OPERATOR] = name
        st.session_state["op_error"] = None
    else:
        st.session_state["op_error"] = "Wrong secret, or no name given: actions stay off."
    st.session_state["op_secret"] = ""


def sidebar(s: Settings) -> None:
    secret = configured_secret(s)
    with st.sidebar:
        st.markdown("**Operator actions**")
        if secret is None:
            st.caption("Read-only. Set JETWATCH_OPERATOR_SECRET (or --operator-secret-file) to enable actions.")
            return
        who = st.session_state.get(OPERATOR)
        if who:
            st.caption(f"enabled for {who}")
            st.button("Lock actions", key="op_lock", on_click=lambda: st.session_state.pop(OPERATOR, None))
            return
        st.text_input("Your name (for the audit log)", key="op_name")
        st.text_input("Operator secret", key="op_secret", type="password")
        st.button("Enable actions", key="op_enable", on_click=_login, args=(secret,))
        if st.session_state.get("op_error"):
            st.error(st.session_state["op_error"])


def request(action: str, target: ops.Target, **params: Any) -> None:
    """on_click of an action button: remember what was asked, confirm it on the next run."""
    st.session_state[PENDING] = {"action": action, "target": target, "params": params}


def _describe(pending: dict[str, Any]) -> str:
    return catalog.confirmation(pending["action"], pending["target"], pending["params"])


async def _run(s: Settings, pending: dict[str, Any]) -> ops.ActionResult:
    nc = await connect(s, name="jetwatch-dashboard-action")
    try:
        api = JetStreamAPI(nc, timeout=s.request_timeout)
        return await catalog.perform(api, pending["action"], pending["target"], pending["params"])
    finally:
        await nc.drain()


def execute(s: Settings, store: Store, pending: dict[str, Any]) -> ops.ActionResult:
    """Run a confirmed action. Refuses unless this session is an enabled operator."""
    who = operator(s)
    target = pending["target"]
    if who is None:
        return ops.ActionResult(pending["action"], target, False, "refused: operator actions are not enabled",
                                None, {"refused": True})
    if pending["action"] == "drain":
        p = pending["params"]
        plan = ops.DrainPlan(p["then"], float(p["timeout_s"]), p.get("stay_until"))
        drain_id = spawn_detached(s, target, plan, who, Path(s.data_dir) / "logs")
        return ops.ActionResult("drain", target, True, f"drain {drain_id} started; it runs on if this page closes",
                                None, {"drain_id": drain_id})
    try:
        result = asyncio.run(_run(s, pending))
    except ConnectError as exc:
        result = ops.ActionResult(pending["action"], target, False, str(exc), None)
    ops.record(store, result, who, "dashboard", catalog.audit_params(pending["action"], pending["params"]))
    result.details["at"] = ops.utcnow()
    return result


def dialog(s: Settings, store: Store) -> None:
    """Open the confirmation while an action is pending."""
    pending = st.session_state.get(PENDING)
    if not pending:
        return

    @st.dialog("Confirm action")
    def confirm() -> None:
        st.markdown("**" + md(_describe(pending)) + "**")
        st.caption(f"on {s.server or 'the configured server'}, as {operator(s) or 'nobody'}")
        c1, c2 = st.columns(2)
        if c1.button("Confirm", key="action_confirm", type="primary"):
            st.session_state[RESULT] = execute(s, store, pending)
            st.session_state.pop(PENDING, None)
            st.rerun()
        if c2.button("Cancel", key="action_cancel"):
            st.session_state.pop(PENDING, None)
            st.rerun()

    confirm()


def show_result() -> None:
    result: ops.ActionResult | None = st.session_state.get(RESULT)
    if result is None:
        return
    (st.success if result.ok else st.error)(f"{result.action}: {result.message}")
    if result.reply is not None:
        st.json(result.reply, expanded=False)


def new_pin_after(store: Store, result: ops.ActionResult) -> pd.DataFrame:
    """Pins of the target consumer recorded after the action (for the 'new pin' line)."""
    at = result.details.get("at") or ops.utcnow()
    since = at - dt.timedelta(seconds=2)
    try:
        events = store.query("pin_events_range", {"since": since, "until": ops.utcnow() + dt.timedelta(minutes=1)})
    except StoreError:
        return pd.DataFrame()
    t = result.target
    return events[(events["stream"] == t.stream) & (events["consumer"] == t.consumer) & (events["event"] == "pinned")
                  & (pd.to_datetime(events["ts"], utc=True) >= pd.Timestamp(since))]


def drain_progress(store: Store, stream: str, consumer: str) -> None:
    try:
        drains = drains_for(store, stream, consumer)
    except StoreError:
        return
    if drains.empty:
        return
    d = drains.iloc[0]
    start = int(d["ack_pending_start"]) if pd.notna(d["ack_pending_start"]) else 0
    now = int(d["ack_pending_now"]) if pd.notna(d["ack_pending_now"]) else None
    done = 1.0 if not start else max(0.0, min(1.0, 1 - (now if now is not None else start) / start))
    label = f"drain {d['drain_id']} by {d['actor']} (then {d['then_action']}): {d['state']}"
    if d["state"] == "draining":
        st.progress(done, text=f"{label}, {now if now is not None else '?'} of {start} in flight, {d['message']}")
    else:
        (st.success if d["state"] == "done" else st.warning)(f"{label}: {d['message']}")
