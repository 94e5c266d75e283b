"""Window features: what the health rules look at, computed for many consumers at once.

The rules judge trends over a window, not single readings. This module reduces each
consumer's samples in a window to a handful of numbers (first, last, min, slope, ...), vectorised
with pandas so that ten thousand consumers cost one groupby, and so that the dashboard and the
Spark pipeline (through `applyInPandas`) compute them with the very same code.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

KEY = ["account", "stream", "consumer"]

SAMPLE_FIELDS = KEY + [
    "ts", "created", "num_pending", "num_ack_pending", "num_waiting", "num_redelivered",
    "delivered_consumer_seq", "delivered_stream_seq", "ack_floor_stream_seq", "paused", "pinned_id",
]

FEATURE_COLUMNS = KEY + [
    "samples", "span_seconds", "last_ts",
    "pending_first", "pending_last", "pending_min", "pending_slope", "pending_rising_share",
    "ack_pending_min", "ack_pending_last", "ack_pending_recent_min",
    "waiting_max", "waiting_last", "waiting_recent_min",
    "delivered_moved", "ack_floor_moved", "deliveries", "stream_delivered", "acked",
    "redelivered_first", "redelivered_last", "redelivered_never_falls",
    "paused_last", "nopin_seconds", "pinned_last", "sample_pin_switches",
]

RECENT = 3  # "the latest samples" of the saturation rule


def _trim_resets(df: pd.DataFrame) -> pd.DataFrame:
    """Keep, per consumer, only the samples since its sequences last started over.

    A consumer deleted and recreated under the same name starts its sequences at zero again;
    comparing across that reset would read as negative progress. `df` is sorted by (gid, t).
    """
    grp = df.groupby("gid", sort=False)
    prev_seq = grp["delivered_consumer_seq"].shift()
    prev_created = grp["created"].shift()
    reset = (df["delivered_consumer_seq"] < prev_seq) | (
        prev_created.notna() & df["created"].notna() & (df["created"] != prev_created))
    epoch = reset.astype(int).groupby(df["gid"], sort=False).cumsum()
    last_epoch = epoch.groupby(df["gid"], sort=False).transform("max")
    return df[epoch == last_epoch]


def window_features(samples: pd.DataFrame) -> pd.DataFrame:
    """One row of features per consumer from its samples in one window."""
    if samples.empty:
        return pd.DataFrame(columns=FEATURE_COLUMNS)
    df = samples[SAMPLE_FIELDS].copy()
    # One integer id per consumer, factorised once: grouping by three strings again and again
    # is what a fleet of ten thousand consumers would pay for.
    df["gid"] = df.groupby(KEY, sort=False).ngroup()
    df["t"] = (pd.to_datetime(df["ts"], utc=True) - pd.Timestamp("2000-01-01", tz="UTC")).dt.total_seconds()
    for col in ("num_pending", "num_ack_pending", "num_waiting", "num_redelivered",
                "delivered_consumer_seq", "delivered_stream_seq", "ack_floor_stream_seq"):
        df[col] = pd.to_numeric(df[col], errors="coerce").fillna(0).astype("float64")
    df = df.sort_values(["gid", "t"], kind="stable").reset_index(drop=True)
    df = _trim_resets(df).reset_index(drop=True)
    keys = df["gid"]
    grp = df.groupby(keys, sort=False)

    # Least-squares slope of pending over time: a trend, robust to one odd reading.
    t_mean = grp["t"].transform("mean")
    p_mean = grp["num_pending"].transform("mean")
    df["_cov"] = (df["t"] - t_mean) * (df["num_pending"] - p_mean)
    df["_var"] = (df["t"] - t_mean) ** 2
    df["_step_up"] = (grp["num_pending"].diff() > 0).astype(float)
    df["_step_n"] = grp["num_pending"].diff().notna().astype(float)
    df["_redeliv_falls"] = (grp["num_redelivered"].diff() < 0).astype(float)
    df["_recent"] = grp.cumcount(ascending=False) < RECENT

    # Trailing run of samples with work pending and nobody pinned.
    no_pin = df["pinned_id"].isna() & (df["num_pending"] > 0)
    breaks = (~no_pin).astype(int).groupby(keys, sort=False).cumsum()
    last_break = breaks.groupby(keys, sort=False).transform("max")
    trailing = no_pin & (breaks == last_break)
    df["_nopin_start"] = df["t"].where(trailing)

    pinned = df["pinned_id"]
    prev_pinned = grp["pinned_id"].shift()
    df["_switch"] = (pinned.notna() & prev_pinned.notna() & (pinned != prev_pinned)).astype(int)
    df["_paused"] = df["paused"].fillna(False).astype(bool)

    recent = df[df["_recent"]].groupby("gid", sort=False)
    agg = grp.agg(
        account=("account", "first"), stream=("stream", "first"), consumer=("consumer", "first"),
        samples=("t", "size"), t_first=("t", "first"), t_last=("t", "last"), last_ts=("ts", "last"),
        pending_first=("num_pending", "first"), pending_last=("num_pending", "last"),
        pending_min=("num_pending", "min"), cov=("_cov", "sum"), var=("_var", "sum"),
        step_up=("_step_up", "sum"), step_n=("_step_n", "sum"),
        ack_pending_min=("num_ack_pending", "min"), ack_pending_last=("num_ack_pending", "last"),
        waiting_max=("num_waiting", "max"), waiting_last=("num_waiting", "last"),
        dcs_first=("delivered_consumer_seq", "first"), dcs_last=("delivered_consumer_seq", "last"),
        dss_first=("delivered_stream_seq", "first"), dss_last=("delivered_stream_seq", "last"),
        af_first=("ack_floor_stream_seq", "first"), af_last=("ack_floor_stream_seq", "last"),
        redelivered_first=("num_redelivered", "first"), redelivered_last=("num_redelivered", "last"),
        redeliv_falls=("_redeliv_falls", "sum"), paused_last=("_paused", "last"),
        nopin_start=("_nopin_start", "min"), pinned_last=("pinned_id", "last"),
        sample_pin_switches=("_switch", "sum"),
    )
    rec = recent.agg(ack_pending_recent_min=("num_ack_pending", "min"),
                     waiting_recent_min=("num_waiting", "min"))
    out = agg.join(rec, how="left").reset_index(drop=True)
    out["span_seconds"] = out["t_last"] - out["t_first"]
    out["pending_slope"] = np.where(out["var"] > 0, out["cov"] / out["var"].where(out["var"] > 0, 1), 0.0)
    out["pending_rising_share"] = np.where(out["step_n"] > 0, out["step_up"] / out["step_n"].where(out["step_n"] > 0, 1), 0.0)
    out["delivered_moved"] = out["dcs_last"] > out["dcs_first"]
    out["ack_floor_moved"] = out["af_last"] > out["af_first"]
    out["deliveries"] = (out["dcs_last"] - out["dcs_first"]).clip(lower=0)
    out["stream_delivered"] = (out["dss_last"] - out["dss_first"]).clip(lower=0)
    out["acked"] = (out["af_last"] - out["af_first"]).clip(lower=0)
    out["redelivered_never_falls"] = out["redeliv_falls"] == 0
    out["nopin_seconds"] = (out["t_last"] - out["nopin_start"]).fillna(0.0)
    return out[FEATURE_COLUMNS]
