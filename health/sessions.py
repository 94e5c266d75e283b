"""Pin sessions from pin events, computed once: by sql/queries/stage_pin_sessions.sql.

The pages read sessions from the store through that query (the live tail after the pipeline's last
run, dashboard/data.pin_history); this runs the same query over a frame of events in a scratch
in-memory database, for a page that holds its events already and for the tests that hold the
pipeline's Spark sessions and these together.
"""

from __future__ import annotations

import datetime as dt

import duckdb
import pandas as pd

from jetwatch import sql

KEY = ["account", "stream", "consumer"]
EVENT_COLUMNS = ["ts", *KEY, "group_name", "event", "pinned_id", "reason", "source"]
SESSION_COLUMNS = KEY + ["group_name", "pinned_id", "start_ts", "end_ts", "duration_seconds",
                         "end_reason", "gap_seconds"]
ONGOING = "still pinned"  # the end reason of a pin nothing has ended yet: its end is now


def pin_sessions(events: pd.DataFrame, until: dt.datetime) -> pd.DataFrame:
    """One row per pin of `events` (start, end, duration, how it ended, gap to the next pin); an
    ongoing pin ends at `until`."""
    if events.empty:
        return pd.DataFrame(columns=SESSION_COLUMNS)
    frame = events.reindex(columns=EVENT_COLUMNS).copy()
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
    for column in EVENT_COLUMNS[1:]:
        frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        con.register("session_events", frame)
        con.execute(sql.query("set_sessions_until"), {"until": until})
        con.execute(sql.query("stage_pin_sessions"))
        out = con.execute(sql.query("pin_sessions_live")).df()
    for column in ("start_ts", "end_ts"):  # nanoseconds, as pandas makes times
        out[column] = pd.to_datetime(out[column], utc=True).astype("datetime64[ns, UTC]")
    out = out.sort_values([*KEY, "end_ts", "start_ts", "end_reason", "pinned_id"], na_position="first")
    return out[SESSION_COLUMNS].reset_index(drop=True)
