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


def read_window(con: duckdb.DuckDBPyConnection, now: dt.datetime, thresholds: Thresholds) -> WindowInputs:
    """The health window's features (window_features.sql over the samples just written), event
    counts, the live state with limits and the previous verdicts: SQL only, so the store is held
    for as short as possible; the rules run after the transaction."""
    since = now - dt.timedelta(seconds=thresholds.health_window)
    con.execute(sql.query("set_window_since"), {"since": since})
    con.execute(sql.query("stage_window_samples"))
    return WindowInputs(
        at=now,
        features=con.execute(sql.query("window_features")).df(),
        counts=con.execute(sql.query("window_event_counts"), {"since": since}).df(),
        latest=con.execute(sql.query("fleet_latest")).df(),
        previous=con.execute(sql.query("verdicts_previous")).df(),
    )


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
    return out


def decide(inputs: WindowInputs, thresholds: Thresholds) -> JudgedCycle:
    """Judge every consumer and find this cycle's transitions against the previous verdicts;
    a verdict that holds keeps its `since`. Pure: nothing is written."""
    now = inputs.at
    judged = judge(inputs, thresholds)
    now_ts = pd.Timestamp(now).tz_convert("UTC") if pd.Timestamp(now).tzinfo else pd.Timestamp(now, tz="UTC")
    if judged.empty:
        return JudgedCycle(now, judged.assign(since=pd.Series(dtype="datetime64[ns, UTC]")),
                           pd.DataFrame(columns=["ts", *KEY, "from_verdict", "to_verdict", "reason"]))
    merged = judged.merge(inputs.previous.rename(columns={"verdict": "from_verdict", "since": "prev_since"}),
                          on=KEY, how="left")
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
    return JudgedCycle(now, merged.drop(columns=["prev_since"]), changes)


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
        "judged_at": pa.array([now_ts] * len(merged), pa.timestamp("us", tz="UTC")),
        "samples": pa.array(pd.to_numeric(merged["samples"], errors="coerce").fillna(0).astype("int64"), pa.int64()),
        **{c: pa.array(pd.to_numeric(merged[c], errors="coerce").astype(float), pa.float64(), from_pandas=True)
           for c in ("delivered_per_second", "acked_per_second", "redelivered_per_second")},
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


def judge_stored_cycle(store: Store, now: dt.datetime, thresholds: Thresholds) -> JudgedCycle:
    """The collector's judging after it committed a cycle's samples: the window's features on a
    read-only connection (dashboard readers are not kept out meanwhile), the rules with the
    file released, then one short write transaction that keeps the verdicts."""
    judged = decide(store.read(lambda con: read_window(con, now, thresholds)), thresholds)
    store.write(lambda con: keep(con, judged))
    return judged


def judge_cycle(con: duckdb.DuckDBPyConnection, now: dt.datetime, thresholds: Thresholds) -> JudgedCycle:
    """Read, judge and keep in one transaction (for callers that hold the store anyway)."""
    judged = decide(read_window(con, now, thresholds), thresholds)
    keep(con, judged)
    return judged


def _statements(name: str) -> list[str]:
    return [s for s in sql.query(name).split(";") if s.strip()]
