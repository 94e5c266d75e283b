"""The `silence` action: acknowledge a consumer's current verdict for a while, with a note.

Unlike the other actions it sends nothing to the server: a silence lives in jetwatch's store, the
cluster's own (where the consumer's verdicts are). It has their shape all the same (actions/audit.py
writes the intent before and the outcome after): check (a verdict that alerts, the one the operator
saw, a bounded time, a note) → keep it → tell. The rule of what it holds back, and until when, is
health/silences.py's.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from typing import Any

from jetwatch import sql
from jetwatch.actions import operations as ops
from jetwatch.core.clock import utcnow
from jetwatch.core.durations import duration
from jetwatch.health import silences as rule
from jetwatch.store.database import Store, StoreError


def _refuse(target: ops.Target, why: str) -> ops.ActionResult:
    return ops.ActionResult("silence", target, False, why, None, {"refused": True})


def check(params: Mapping[str, Any]) -> str | None:
    """What is wrong with a silence's parameters, in words (None: nothing)."""
    seconds = params.get("for_s")
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not 0 < seconds <= rule.MAX_SECONDS:
        return (f"not set: a silence lasts more than nothing and at most {duration(rule.MAX_SECONDS)} "
                f"(asked: {duration(seconds) if isinstance(seconds, (int, float)) else seconds!r})")
    note = str(params.get("note") or "").strip()
    if not note:
        return "not set: say why in a note (who works on it, the ticket): it is shown beside the verdict"
    if len(note) > rule.NOTE_CHARS:
        return f"not set: the note is {len(note)} characters long; keep it under {rule.NOTE_CHARS}"
    return None


def silence(store: Store | None, target: ops.Target, params: Mapping[str, Any], actor: str,
            action_id: str | None = None) -> ops.ActionResult:
    """Silence the consumer's current verdict (the one in `expect_verdict`, when the operator named
    the one they saw) for `for_s` seconds with `note`; a silence already open on it is replaced."""
    wrong = check(params)
    if wrong:
        return _refuse(target, wrong)
    if store is None:
        return _refuse(target, "not set: a silence is kept in the store, and there is none (--db)")
    now = utcnow()
    expires = now + dt.timedelta(seconds=float(params["for_s"]))
    note = str(params["note"]).strip()
    expected = params.get("expect_verdict")

    def keep(con: Any) -> ops.ActionResult:
        found = con.execute(sql.query("silence_target"), {"account": target.account, "stream": target.stream,
                                                       "consumer": target.consumer}).fetchall()
        if not found:
            return _refuse(target, f"not set: jetwatch has no verdict for {target.stream}/{target.consumer}"
                           f"{' in account ' + target.account if target.account else ''} (is the collector running, "
                           "and the name right?)")
        if len(found) > 1:
            return _refuse(target, f"not set: {target.stream}/{target.consumer} is in accounts "
                           f"{', '.join(sorted(str(r[0]) for r in found))}: name the account (--account)")
        account, _, _, verdict, level, _ = found[0]
        acted_on = ops.Target(account, target.stream, target.consumer, target.group)
        if not rule.alerting(verdict):
            return _refuse(acted_on, f"not set: the verdict is {verdict}, which raises no alert: nothing to silence")
        if expected and str(expected).upper() != verdict:
            return _refuse(acted_on, f"not set: the verdict changed since you looked: you saw {str(expected).upper()}, "
                           f"it is {verdict} now. Silence {verdict} if that is what you mean")
        previous = con.execute(sql.query("silences_open"), {}).df()
        for row in previous.itertuples():
            if (row.account, row.stream, row.consumer) == (account, target.stream, target.consumer):
                con.execute(sql.query("end_silence"), {"silence_id": row.silence_id, "ended_at": now,
                                                    "end_reason": f"replaced by a new silence by {actor}"})
        con.execute(sql.query("insert_silence"), {
            "silence_id": action_id or uuid.uuid4().hex, "account": account, "stream": target.stream,
            "consumer": target.consumer, "verdict": verdict, "level": level, "note": note, "actor": actor,
            "created_at": now, "expires_at": expires})
        return ops.ActionResult(
            "silence", acted_on, True,
            f"{verdict} silenced until {expires:%Y-%m-%d %H:%M:%S} UTC (for {duration(float(params['for_s']))}): "
            "its alerts are held back until then, or until the verdict turns into another that alerts; the "
            "verdict itself stays shown", None,
            {"verdict": verdict, "until": expires, "replaced": int(len(previous[
                (previous["account"] == account) & (previous["stream"] == target.stream)
                & (previous["consumer"] == target.consumer)])) if not previous.empty else 0})

    try:
        return store.write(keep)
    except StoreError as exc:
        return ops.ActionResult("silence", target, False, f"not set: the store refused it ({exc})", None)
