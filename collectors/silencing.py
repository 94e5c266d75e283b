"""The collector's part in silences: after each cycle's verdicts are kept, end the silences that
stopped holding (expired, or their verdict turned into another that alerts: health/silences.py),
each with an audit row saying why, in the cycle's own transaction; and hand the ones that still
hold to the exporters (/metrics, Alertmanager), which hold back their alerts."""

from __future__ import annotations

import datetime as dt
import json
import logging

import duckdb
import pandas as pd

from jetwatch import sql
from jetwatch.core.clock import rfc3339, utcnow
from jetwatch.health import silences as rule
from jetwatch.store import audit

log = logging.getLogger("jetwatch.collector")
ACTOR = "jetwatch collector"


def settle(con: duckdb.DuckDBPyConnection, now: dt.datetime) -> pd.DataFrame:
    """End the open silences that no longer hold at `now` (audited), in the caller's transaction;
    returns the ones that still hold (silences_open.sql's columns)."""
    found = con.execute(sql.query("silences_settle")).df()
    if found.empty:
        return found
    holding = []
    for row in found.itertuples(index=False):
        why = rule.end_reason(row.verdict, row.silenced_verdict, row.silenced_until, now)
        if why is None:
            holding.append(True)
            continue
        holding.append(False)
        con.execute(sql.query("end_silence"), {"silence_id": row.silence_id, "ended_at": now, "end_reason": why})
        until = pd.Timestamp(row.silenced_until).to_pydatetime()
        audit.append(con, audit.AuditRow(
            ts=utcnow(), actor=ACTOR, origin="collector", action="silence", account=row.account, stream=row.stream,
            consumer=row.consumer, group_name=None,
            parameters=json.dumps({"verdict": row.silenced_verdict, "until": rfc3339(until), "by": row.silenced_by}),
            outcome="expired" if why == "expired" else "ended", reply=json.dumps({"message": f"silence ended: {why}"}),
            action_id=row.silence_id, phase="event"))
        log.info("silence of %s/%s (%s, by %s) ended: %s", row.stream, row.consumer, row.silenced_verdict,
                 row.silenced_by, why)
    return found[pd.Series(holding, index=found.index)].drop(columns=["verdict"]).reset_index(drop=True)
