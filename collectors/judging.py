"""Judging every consumer after each cycle, right after the cycle's samples are committed.

The verdict is computed where the data is: the window-features SQL (health/features.py's one
definition, sql/queries/window_features.sql) runs inside the store over the health window, on a
read-only connection (so the dashboard's readers are not kept out while it runs), and
`health.rules.evaluate_features` judges the result with the file released. The
verdicts replace `verdicts_current`; each transition is appended to `verdict_changes`. Pages,
`jetwatch status`, /metrics and alerts read what this wrote instead of recomputing windows.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from jetwatch import sql
from jetwatch.collectors.window_state import WindowState
from jetwatch.health.eta import ETA_COLUMNS, drain_eta
from jetwatch.health.rules import BY_NAME, LIMIT_COLUMNS, Thresholds, evaluate_features
from jetwatch.store.database import Store

KEY = ["account", "stream", "consumer"]
NO_SAMPLES = "no samples in the window yet"


@dataclass
class JudgedCycle:
    """What one cycle judged: every consumer of the live state with its state, limits, verdict,
    level, findings and since when; and the transitions of this cycle."""

    at: dt.datetime
    consumers: pd.DataFrame
    changes: pd.DataFrame


def _jsonable(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return str(value)


def _findings_json(findings: list[Any]) -> list[str]:
    """JSON text per consumer; the shared OK list is encoded once."""
    cache: dict[int, str] = {}
    out = []
    for f in findings:
        key = id(f)
        if key not in cache:
            cache[key] = json.dumps(f, default=_jsonable)
        out.append(cache[key])
    return out


@dataclass
class WindowInputs:
    """What judging reads from the store, fetched inside the cycle's write transaction."""

    at: dt.datetime
    features: pd.DataFrame
    counts: pd.DataFrame
    latest: pd.DataFrame
    previous: pd.DataFrame


def read_window(con: duckdb.DuckDBPyConnection, now: dt.datetime, thresholds: Thresholds,
                window: WindowState | None = None) -> WindowInputs:
    """The health window's features, event counts, the live state with limits and the previous
    verdicts. The features come from the collector's in-memory `window` when it keeps one (no
    scan of the samples), else from window_features.sql over the store; the rules run after."""
    since = now - dt.timedelta(seconds=thresholds.health_window)
    latest = con.execute(sql.query("fleet_latest")).df()
    if window is None:
        con.execute(sql.query("set_window_since"), {"since": since})
        con.execute(sql.query("stage_window_samples"))
        features = con.execute(sql.query("window_features")).df()
    else:
        features = window.features(since, list(zip(latest["account"], latest["stream"], latest["consumer"])))
    return WindowInputs(
        at=now,
        features=features,
        counts=con.execute(sql.query("window_event_counts"), {"since": since}).df(),
        latest=latest,
        previous=con.execute(sql.query("verdicts_previous")).df(),
    )


def load_window(store: Store, now: dt.datetime, thresholds: Thresholds) -> WindowState:
    """A collector's window at start: the samples of the health window already stored."""
    window = WindowState(thresholds.health_window)
    since = now - dt.timedelta(seconds=thresholds.health_window)

    def stored(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
        con.execute(sql.query("set_window_since"), {"since": since})
        con.execute(sql.query("stage_window_samples"))
        return con.execute("SELECT * FROM window_samples").df()

    if store.exists():
        window.seed(store.read(stored))
    return window


def judge(inputs: WindowInputs, thresholds: Thresholds) -> pd.DataFrame:
    """The verdict of every consumer in the live state, with its state and limits."""
    latest = inputs.latest
    if latest.empty:
        return latest.assign(verdict=pd.Series(dtype=object), reason=pd.Series(dtype=object))
    verdicts = evaluate_features(inputs.features, latest[KEY + LIMIT_COLUMNS], thresholds, inputs.counts)
    out = latest.merge(verdicts.drop(columns=["last_ts"]), on=KEY, how="left")
    missing = out["verdict"].isna()
    if missing.any():
        out.loc[missing, "verdict"] = "COLLECTING"
        out.loc[missing, "reason"] = NO_SAMPLES
        out.loc[missing, "findings"] = pd.Series(
            [[{"verdict": "COLLECTING", "reason": NO_SAMPLES, "numbers": {"samples": 0}}]] * int(missing.sum()),
            index=out.index[missing])
    out["level"] = out["verdict"].map(lambda v: BY_NAME[v].level)
    return with_eta(out, inputs.features)


def with_eta(judged: pd.DataFrame, features: pd.DataFrame) -> pd.DataFrame:
    """The drain ETA of every judged consumer (health/eta.py): its backlog now, the backlog's
    trend over the window, paused or nobody pulling."""
    trend = [c for c in ("backlog_slope", "backlog_slope_se") if c in features]
    out = judged.merge(features[KEY + trend], on=KEY, how="left") if trend else judged.copy()
    for c in ("backlog_slope", "backlog_slope_se"):
        if c not in out:
            out[c] = np.nan
    frame = pd.DataFrame({
        "backlog": pd.to_numeric(out["num_pending"], errors="coerce").fillna(0)
        + pd.to_numeric(out["num_ack_pending"], errors="coerce").fillna(0),
        "backlog_slope": out["backlog_slope"], "backlog_slope_se": out["backlog_slope_se"],
        "paused": out["paused"].astype(object).where(out["paused"].notna(), False),
        "no_pullers": out["verdict"] == "NO_PULLERS",
        "is_pull": out["is_pull"].astype(object).where(out["is_pull"].notna(), True),
    }, index=out.index)
    out[ETA_COLUMNS] = drain_eta(frame)
    return out.drop(columns=["backlog_slope", "backlog_slope_se"])


def decide(inputs: WindowInputs, thresholds: Thresholds) -> JudgedCycle:
    """Judge every consumer and find this cycle's transitions against the previous verdicts;
    a verdict that holds keeps its `since`. Pure: nothing is written."""
    now = inputs.at
    judged = judge(inputs, thresholds)
    now_ts = pd.Timestamp(now).tz_convert("UTC") if pd.Timestamp(now).tzinfo else pd.Timestamp(now, tz="UTC")
    if judged.empty:
        return JudgedCycle(now, judged.assign(since=pd.Series(dtype="datetime64[ns, UTC]")),
                           pd.DataFrame(columns=["ts", *KEY, "from_verdict", "to_verdict", "reason"]))
    previous = inputs.previous.rename(columns={"verdict": "from_verdict", "since": "prev_since",
                                               "reason": "prev_reason", "findings": "prev_findings",
                                               "judged_at": "prev_judged_at"})
    merged = hold_last_known(judged.merge(previous, on=KEY, how="left"), now_ts)
    same = merged["from_verdict"] == merged["verdict"]
    merged["since"] = pd.to_datetime(merged["prev_since"], utc=True).where(same, now_ts)
    changed = merged[~same]
    changes = pd.DataFrame({
        "ts": [now_ts] * len(changed), "account": changed["account"].to_numpy(),
        "stream": changed["stream"].to_numpy(), "consumer": changed["consumer"].to_numpy(),
        "from_verdict": changed["from_verdict"].astype(object).where(changed["from_verdict"].notna(), None).to_numpy(),
        "to_verdict": changed["verdict"].to_numpy(), "reason": changed["reason"].astype(str).to_numpy(),
        # Since when the old verdict had held: what alerting needs to resolve what it fired.
        "from_since": pd.to_datetime(changed["prev_since"], utc=True).to_numpy(),
    })
    return JudgedCycle(now, merged.drop(columns=["prev_since", "prev_reason", "prev_findings", "prev_judged_at"],
                                        errors="ignore"), changes)


LAST_KNOWN = "last known, judged "


def hold_last_known(merged: pd.DataFrame, now_ts: pd.Timestamp) -> pd.DataFrame:
    """A consumer that would be COLLECTING only for lack of fresh samples (the collector was
    stopped longer than the health window, or a server did not answer) keeps its previous verdict,
    findings and since, marked in its reason with when it was last judged: a STALLED consumer
    never turns grey just because the collector died with it. A consumer never judged before
    stays COLLECTING."""
    merged = merged.copy()
    merged["judged_at"] = now_ts
    if "prev_reason" not in merged:
        return merged
    hold = ((merged["verdict"] == "COLLECTING") & merged["from_verdict"].notna()
            & (merged["from_verdict"] != "COLLECTING"))
    if not hold.any():
        return merged
    for i in merged.index[hold]:
        reason = str(merged.at[i, "prev_reason"])
        judged_at = pd.Timestamp(merged.at[i, "prev_judged_at"])
        judged_at = judged_at.tz_convert("UTC") if judged_at.tzinfo else judged_at.tz_localize("UTC")
        if not reason.startswith(LAST_KNOWN):
            reason = (f"{LAST_KNOWN}{judged_at:%Y-%m-%d %H:%M:%S} UTC (too few fresh samples to judge again, "
                      f"the collector or the server was away): {reason}")
        merged.at[i, "verdict"] = merged.at[i, "from_verdict"]
        merged.at[i, "reason"] = reason
        prev = merged.at[i, "prev_findings"]
        merged.at[i, "findings"] = json.loads(prev) if isinstance(prev, str) else prev
        merged.at[i, "judged_at"] = judged_at
    merged.loc[hold, "level"] = merged.loc[hold, "verdict"].map(lambda v: BY_NAME[v].level)
    return merged


def keep(con: duckdb.DuckDBPyConnection, judged: JudgedCycle) -> None:
    """Write a judged cycle: its verdicts replace verdicts_current, its transitions are appended."""
    merged, now_ts = judged.consumers, pd.Timestamp(judged.at)
    if merged.empty:
        con.execute("DELETE FROM verdicts_current")
        return
    batch = pa.table({
        "account": pa.array(merged["account"], pa.string()), "stream": pa.array(merged["stream"], pa.string()),
        "consumer": pa.array(merged["consumer"], pa.string()), "verdict": pa.array(merged["verdict"], pa.string()),
        "level": pa.array(merged["level"], pa.string()), "reason": pa.array(merged["reason"].astype(str), pa.string()),
        "findings": pa.array(_findings_json(list(merged["findings"])), pa.string()),
        "since": pa.array(merged["since"], pa.timestamp("us", tz="UTC")),
        # A held last known verdict keeps the time it was judged (see hold_last_known).
        "judged_at": pa.array(pd.to_datetime(merged["judged_at"], utc=True) if "judged_at" in merged
                              else [now_ts] * len(merged), pa.timestamp("us", tz="UTC")),
        "samples": pa.array(pd.to_numeric(merged["samples"], errors="coerce").fillna(0).astype("int64"), pa.int64()),
        **{c: pa.array(pd.to_numeric(merged[c], errors="coerce").astype(float), pa.float64(), from_pandas=True)
           for c in ("delivered_per_second", "acked_per_second", "redelivered_per_second", *ETA_COLUMNS[1:])},
        "eta_state": pa.array(merged["eta_state"].astype(object).where(merged["eta_state"].notna(), None)
                              if "eta_state" in merged else [None] * len(merged), pa.string()),
    })
    con.register("verdict_batch", batch)
    for statement in _statements("replace_verdicts_current"):
        con.execute(statement)
    con.unregister("verdict_batch")
    if not judged.changes.empty:
        changes = pa.table({
            "ts": pa.array(judged.changes["ts"], pa.timestamp("us", tz="UTC")),
            **{c: pa.array(judged.changes[c], pa.string()) for c in (*KEY, "from_verdict", "to_verdict", "reason")}})
        con.register("change_batch", changes)
        con.execute(sql.query("insert_verdict_changes"))
        con.unregister("change_batch")


def judge_stored_cycle(store: Store, now: dt.datetime, thresholds: Thresholds,
                       window: WindowState | None = None) -> JudgedCycle:
    """The collector's judging after it committed a cycle's samples: the live state and counts
    on a read-only connection (dashboard readers are not kept out meanwhile), the features from
    its in-memory window, the rules with the file released, then one short write transaction
    that keeps the verdicts."""
    judged = decide(store.read(lambda con: read_window(con, now, thresholds, window)), thresholds)
    store.write(lambda con: keep(con, judged))
    return judged


def judge_cycle(con: duckdb.DuckDBPyConnection, now: dt.datetime, thresholds: Thresholds) -> JudgedCycle:
    """Read, judge and keep in one transaction (for callers that hold the store anyway)."""
    judged = decide(read_window(con, now, thresholds), thresholds)
    keep(con, judged)
    return judged


def _statements(name: str) -> list[str]:
    return [s for s in sql.query(name).split(";") if s.strip()]
