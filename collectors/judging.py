"""Judging every consumer after each cycle, right after the cycle's samples are committed.

The collector keeps what judging needs in memory (collectors/live_state.py: the health window's
samples, the live state with its limits, the verdicts it kept and each consumer's last activity),
seeded from the store once when it starts. A cycle is judged without reading the store back: the
window features come from the in-memory window (held equal to window_features.sql by
tests/test_window_state.py), `health.rules.verdict_columns` (the one health definition) judges
them, and only the verdicts that changed (verdict, reason, findings, numbers; a quiet consumer's
activity) are written to `verdicts_current`, with each transition appended to `verdict_changes`.
Pages, `jetwatch status`, /metrics and alerts read what this wrote instead of recomputing windows.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa

from jetwatch import sql
from jetwatch.collectors import silencing
from jetwatch.collectors.live_state import ACTIVITY, KEPT_NUMBERS, LAST_KNOWN, STATE, TIMES, LiveState, micros, stamps
from jetwatch.health import easing, pull_rhythm
from jetwatch.health.columns import floats
from jetwatch.health.config_findings import NONE, config_findings, held_resets, pull_findings
from jetwatch.health.eta import ETA_COLUMNS, drain_eta_columns
from jetwatch.health.rules import (
    BY_NAME,
    COUNT_COLUMNS,
    DURATIONS,
    THRESHOLD_COLUMNS,
    THRESHOLD_INPUT,
    Thresholds,
    acks_in_window,
    rhythm_after,
    verdict_columns,
)
from jetwatch.store.database import Store

KEY = ["account", "stream", "consumer"]
NO_SAMPLES = "no samples in the window yet"
NO_SAMPLES_FINDINGS = [{"verdict": "COLLECTING", "reason": NO_SAMPLES, "numbers": {"samples": 0}}]
QUIET = ("NO_PULLERS", "STALLED")  # verdicts whose reason says since when: their activity is kept fresh
LIMITS = ("is_pull", "filtered", "max_ack_pending", "max_waiting", "priority_policy", "ack_wait_ns",
          "priority_timeout_ns", "time_to_loss_seconds")
RATES = ("delivered_per_second", "acked_per_second", "redelivered_per_second")
CHANGE_COLUMNS = ["ts", *KEY, "from_verdict", "to_verdict", "reason", "from_since"]
LEVELS = {name: v.level for name, v in BY_NAME.items()}
_NO_CHANGES = pd.DataFrame({c: pd.Series(dtype="datetime64[ns, UTC]" if c in ("ts", "from_since") else object)
                            for c in CHANGE_COLUMNS})


class JudgedCycle:
    """What one cycle judged: every consumer of the live state with its state, limits, verdict,
    level, findings and since when (`consumers`, built when first asked for: the exporters need it,
    judging does not); this cycle's transitions; and what it writes."""

    def __init__(self, at: dt.datetime, consumers: pd.DataFrame | Callable[[], pd.DataFrame],
                 changes: pd.DataFrame, written: pa.Table | None = None, gone: pa.Table | None = None) -> None:
        self.at = at
        self._consumers = consumers
        self.changes = changes
        self.written = written  # the rows of verdicts_current this cycle replaced
        self.gone = gone  # consumers that left the live state
        self.commit: Callable[[], None] = lambda: None
        self.stamped: dt.datetime | None = None  # when the verdicts not written this cycle were judged
        # Of each row of `written`: only its numbers or activity changed (its words and since did not).
        self.numbers_only: np.ndarray | None = None
        # The silences that hold after this cycle (silences_open.sql's columns), once it is kept.
        self.silences = pd.DataFrame()

    @property
    def consumers(self) -> pd.DataFrame:
        if callable(self._consumers):
            self._consumers = self._consumers()
        return self._consumers


def _findings_json(findings: list[Any]) -> np.ndarray:
    """JSON text per consumer; a findings list shared by many (every OK) is encoded once."""
    ids = np.fromiter(map(id, findings), dtype=np.int64, count=len(findings))
    distinct, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    texts = np.empty(len(distinct), dtype=object)
    for i, at in enumerate(first.tolist()):
        f = findings[at]
        texts[i] = f if isinstance(f, str) else _ENCODER.encode(f).decode()
    return texts[inverse]


def _jsonable(value: object) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return str(value)


# msgspec's encoder: a non-OK consumer's findings are encoded every cycle its numbers move, and
# the standard library's encoder spent more on them than the rules that found them.
_ENCODER = msgspec.json.Encoder(enc_hook=_jsonable)


# A rate or an ETA that moved by less than this share of itself is not a change worth a write: the
# row keeps the earlier value (the pages show rates to a tenth and ETAs in minutes).
NUMBER_TOLERANCE = 1e-3


def _differ(new: np.ndarray, old: np.ndarray, tolerance: float = 0.0) -> np.ndarray:
    """Element-wise "not the same number" (within `tolerance` of the new one's size), NaN equal to NaN."""
    with np.errstate(invalid="ignore"):
        close = (new == old) | (np.abs(new - old) <= tolerance * np.abs(new))
    return ~(close | (np.isnan(new) & np.isnan(old)))


def _stamp_array(seconds: np.ndarray) -> pa.Array:
    return pa.array(micros(seconds), pa.timestamp("us", tz="UTC"), from_pandas=True)


def _rules(state: LiveState, live: np.ndarray, columns: dict[str, np.ndarray], at_row: np.ndarray,
           pos: np.ndarray, counts: pd.DataFrame, thresholds: Thresholds
           ) -> tuple[np.ndarray, np.ndarray, list[Any], np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """health.rules over the window's features of the consumers with samples (`at_row`, at
    positions `pos` among the `live` ones), their limits and event counts beside: verdict, reason,
    findings, samples, onset and rates per live consumer (COLLECTING for one without samples)."""
    n, m = len(state.keys), len(live)
    for c in LIMITS:
        columns[c] = state.state[c][at_row]
    for c in THRESHOLD_COLUMNS:  # each consumer's own, from its metadata (None: the setting)
        columns[c] = state.state[c][at_row]
    event = {c: np.zeros(n) for c in COUNT_COLUMNS}
    if not counts.empty:
        rows = np.fromiter((state.window.rows.get(k, -1) for k in zip(counts["account"], counts["stream"],
                                                                        counts["consumer"])), np.int64, len(counts))
        for c in COUNT_COLUMNS:
            event[c][rows[rows >= 0]] = pd.to_numeric(counts[c], errors="coerce").fillna(0).to_numpy()[rows >= 0]
    for c in COUNT_COLUMNS:
        columns[c] = event[c][at_row]
    verdicts = verdict_columns(columns, thresholds) if len(at_row) else None

    verdict = np.full(m, "COLLECTING", dtype=object)
    reason = np.full(m, NO_SAMPLES, dtype=object)
    findings: list[Any] = [NO_SAMPLES_FINDINGS] * m
    samples = np.zeros(m)
    onset = np.full(m, np.nan)
    rates = {c: np.full(m, np.nan) for c in RATES}
    if verdicts is not None:
        verdict[pos] = verdicts["verdict"]
        reason[pos] = verdicts["reason"]
        onset[pos] = verdicts["since"]
        if np.array_equal(pos, np.arange(m)):  # every live consumer has samples in the window
            findings = verdicts["findings"]
        else:
            for p, f in zip(pos.tolist(), verdicts["findings"]):
                findings[p] = f
        samples[pos] = verdicts["samples"]
        for c in RATES:
            rates[c][pos] = verdicts[c]
    return verdict, reason, findings, samples, onset, rates


def _hold_last_known(state: LiveState, live: np.ndarray, verdict: np.ndarray, reason: np.ndarray,
                     findings: list[Any], judged_at: np.ndarray, recreated: np.ndarray) -> None:
    """Hold the last known verdict of a consumer that is COLLECTING only for lack of fresh samples
    (the collector was stopped longer than the health window, or a server did not answer): a
    STALLED consumer never turns grey because the collector died with it. Its reason says when
    it was last judged; a consumer never judged before stays COLLECTING."""
    kept = state.kept_text["verdict"][live]
    hold = (verdict == "COLLECTING") & pd.notna(kept) & (kept != "COLLECTING") & ~recreated
    for i in np.flatnonzero(hold):
        text = str(state.kept_text["reason"][live[i]])
        if not text.startswith(LAST_KNOWN):
            when = pd.Timestamp(state.kept_judged_at[live[i]] * 1e6, unit="us", tz="UTC")
            text = (f"{LAST_KNOWN}{when:%Y-%m-%d %H:%M:%S} UTC (too few fresh samples to judge again, "
                    f"the collector or the server was away): {text}")
        verdict[i], reason[i], findings[i] = kept[i], text, state.kept_text["findings"][live[i]]
        judged_at[i] = state.kept_judged_at[live[i]]


def _say_recreated(verdict: np.ndarray, reason: np.ndarray, findings: list[Any], recreated_at: np.ndarray) -> None:
    """A consumer recreated within the window and still collecting its own samples says so
    (rather than that samples are missing)."""
    for i in np.flatnonzero((verdict == "COLLECTING") & ~np.isnan(recreated_at)):
        when = pd.Timestamp(recreated_at[i] * 1e6, unit="us", tz="UTC")
        reason[i] = f"recreated (seen {when:%H:%M:%S} UTC): judged on its own samples from then; {reason[i]}"
        findings[i] = [{**findings[i][0], "reason": reason[i]}, *findings[i][1:]]


def _eta(state: LiveState, live: np.ndarray, columns: dict[str, np.ndarray], at_row: np.ndarray, pos: np.ndarray,
         verdict: np.ndarray) -> dict[str, np.ndarray]:
    """The drain ETA (health/eta.py) of every live consumer: the backlog now, its trend over the
    window; none where nothing was acknowledged or nobody pulls."""
    m = len(live)
    slope, slope_se = np.full(m, np.nan), np.full(m, np.nan)
    if len(at_row):
        slope[pos], slope_se[pos] = columns["backlog_slope"], columns["backlog_slope_se"]
    pending = np.nan_to_num(floats(state.state["num_pending"][live]))
    in_flight = np.nan_to_num(floats(state.state["num_ack_pending"][live]))
    idle, acked = np.zeros(m, dtype=bool), np.ones(m, dtype=bool)
    if len(at_row):
        idle[pos] = ~np.isnan(columns["idle_onset"]) | ~np.isnan(columns["pin_idle_onset"])
        acked[pos] = acks_in_window(columns)
    return drain_eta_columns({
        "backlog": pending + in_flight, "backlog_slope": slope, "backlog_slope_se": slope_se,
        "paused": state.state["paused"][live], "no_pullers": idle | np.isin(verdict, ("NO_PULLERS", "PIN_IDLE")),
        "acked": acked, "is_pull": state.state["is_pull"][live]})


@dataclass(frozen=True)
class PullsAnnounced:
    """The pull settings workers announced lately (collectors/pull_settings.py `current`), per
    (account, stream, consumer), and the version of the server the collector is connected to."""

    by_consumer: Mapping[tuple[str, str, str], Sequence[Mapping[str, Any]]]
    server_version: str | None = None


PULL_LIMITS = ("priority_policy", "priority_timeout_ns", "max_ack_pending")


def _pull_findings(state: LiveState, position: np.ndarray, config: list[Any], pulls: PullsAnnounced) -> None:
    """Add to `config` (per live consumer) the findings of the pull settings its workers announced:
    only the few consumers with announcements are looked at."""
    for key, announced in pulls.by_consumer.items():
        row = state.window.rows.get(key)
        if row is None or row >= len(position) or position[row] < 0:
            continue
        p = int(position[row])
        found = pull_findings({c: state.state[c][row] for c in PULL_LIMITS}, announced, pulls.server_version)
        if found:
            config[p] = [*config[p], *found]


def judge(state: LiveState, now: dt.datetime, thresholds: Thresholds, counts: pd.DataFrame,
          pulls: PullsAnnounced | None = None) -> JudgedCycle:
    """Judge every live consumer from the in-memory state and find what changed against the
    verdicts kept: pure, nothing is written and `state` is unchanged until `commit`. `pulls`: the
    pull settings the workers announced lately, per consumer, and the server's version."""
    n = len(state.keys)
    live = np.flatnonzero(state.live[:n])
    m = len(live)
    now_s = now.timestamp()
    now_ts = pd.Timestamp(now_s * 1e6, unit="us", tz="UTC")
    own = {THRESHOLD_INPUT + name: floats(state.state[THRESHOLD_INPUT + name][live]) for name in DURATIONS}
    columns = state.feature_columns(now, live, rhythm_after=rhythm_after(thresholds, own, state.state["ack_wait_ns"][live]))
    activity, folded = state.recent_activity(now, live, pull_rhythm.counted_from(thresholds))
    at_row = columns.pop("row", np.zeros(0, dtype=np.int64))
    position = np.full(n, -1, dtype=np.int64)
    position[live] = np.arange(m)
    pos = position[at_row]
    if len(at_row):
        columns.update(pull_rhythm.features({c: activity[c][pos] for c in pull_rhythm.WAITS}, columns))
    recreated_at = np.full(m, np.nan)
    recreated_at[pos] = columns.pop("recreated_ts", np.full(len(at_row), np.nan))
    # Deleted and recreated under its name since its verdict was kept: a new consumer, judged on
    # its own samples only (the kept verdict is the old one's: neither held nor eased into).
    with np.errstate(invalid="ignore"):
        recreated = recreated_at > state.kept_judged_at[live]

    # The rules over the consumers with samples in the window, limits and event counts beside.
    verdict, reason, findings, samples, onset, rates = _rules(state, live, columns, at_row, pos, counts, thresholds)

    eta = _eta(state, live, columns, at_row, pos, verdict)
    # Config findings beside the verdict (never changing it), from the same features and limits.
    config: list[Any] = [NONE] * m
    if len(at_row):
        for p, f in zip(pos.tolist(), config_findings(columns)):
            if f:
                config[p] = f
    if pulls is not None and pulls.by_consumer:
        _pull_findings(state, position, config, pulls)
    # A reset the window has moved past stays shown for a while (reset_shown_for), from what was kept.
    config = held_resets(config, state.kept_text["config_findings"][live], now_s, thresholds.reset_shown_for,
                         recreated)
    config_json = _findings_json(config)
    _say_recreated(verdict, reason, findings, recreated_at)

    kept = state.kept_text["verdict"][live]
    kept_findings = state.kept_text["findings"][live]
    judged_at = np.full(m, now_s)
    _hold_last_known(state, live, verdict, reason, findings, judged_at, recreated)
    # No false comfort: the kept verdict stands until the calmer one has held for clear_after.
    unkept = np.where(recreated, np.array(None, dtype=object), kept)  # a recreated consumer eases from nothing
    held_back, calmer_since = easing.ease(verdict, unkept, state.calmer_since[live], now_s, thresholds.clear_after)
    for i in np.flatnonzero(held_back):
        verdict[i], reason[i], findings[i] = kept[i], state.kept_text["reason"][live[i]], kept_findings[i]
        onset[i] = np.nan
    findings_json = _findings_json(findings)
    same = kept == verdict
    since = easing.since(onset, same & ~recreated, state.kept_since[live], now_s)
    level = np.array([LEVELS[v] for v in verdict.tolist()], dtype=object)

    # What changed against the row kept: only those rows are written.
    numbers = {"samples": samples, **rates, **{c: eta[c] for c in ETA_COLUMNS[1:]}}
    worded = ~state.written[live] | ~same | (reason != state.kept_text["reason"][live])
    worded |= findings_json != kept_findings
    worded |= config_json != state.kept_text["config_findings"][live]
    worded |= eta["eta_state"] != state.kept_text["eta_state"][live]
    worded |= _differ(calmer_since, state.calmer_since[live])
    changed = worded.copy()
    for c in KEPT_NUMBERS:
        changed |= _differ(numbers[c], state.kept_numbers[c][live], 0.0 if c == "samples" else NUMBER_TOLERANCE)
    quiet = np.isin(verdict, QUIET)
    for c in ACTIVITY:
        changed |= quiet & _differ(activity[c], state.activity[c][live])
    for c in pull_rhythm.KEPT:  # a wait for a pull ended: rare, and kept for every verdict
        changed |= _differ(activity[c], state.waits[c][live])
    at = np.flatnonzero(changed)
    keys = state.window.key_columns(live[at])
    written = pa.table({
        **{c: pa.array(keys[i], pa.string()) for i, c in enumerate(KEY)},
        "verdict": pa.array(verdict[at], pa.string()), "level": pa.array(level[at], pa.string()),
        "reason": pa.array(reason[at], pa.string()), "findings": pa.array(findings_json[at], pa.string()),
        "config_findings": pa.array(config_json[at], pa.string()),
        "since": _stamp_array(since[at]),
        "judged_at": _stamp_array(judged_at[at]),
        "samples": pa.array(samples[at].astype(np.int64), pa.int64()),
        **{c: pa.array(numbers[c][at], pa.float64(), from_pandas=True) for c in (*RATES, *ETA_COLUMNS[1:])},
        "eta_state": pa.array(eta["eta_state"][at], pa.string()),
        **{c: _stamp_array(activity[c][at]) for c in ACTIVITY},
        **{c: (_stamp_array(activity[c][at]) if c == "pull_wait_ended" else
               pa.array(activity[c][at], pa.float64(), from_pandas=True)) for c in pull_rhythm.KEPT},
        "calmer_since": _stamp_array(calmer_since[at]),
    })
    gone_rows = np.flatnonzero(state.written[:n] & ~state.live[:n])
    gone_keys = [state.keys[r] for r in gone_rows]
    gone = pa.table({c: pa.array([k[i] for k in gone_keys], pa.string()) for i, c in enumerate(KEY)})

    moved = np.flatnonzero(~same)
    moved_keys = [state.keys[r] for r in live[moved]]
    changes = _NO_CHANGES.copy() if not len(moved) else pd.DataFrame({
        "ts": [now_ts] * len(moved), "account": [k[0] for k in moved_keys], "stream": [k[1] for k in moved_keys],
        "consumer": [k[2] for k in moved_keys], "from_verdict": kept[moved], "to_verdict": verdict[moved],
        "reason": reason[moved].astype(str),
        # Since when the old verdict had held: what alerting needs to resolve what it fired.
        "from_since": stamps(state.kept_since[live[moved]]).to_numpy(),
    }, columns=CHANGE_COLUMNS)

    def consumers() -> pd.DataFrame:
        out = pd.DataFrame(dict(zip(KEY, live_keys)))
        for c in STATE:
            out[c] = snapshot[c]
        for c in TIMES:
            out[c] = pd.to_datetime(out[c], utc=True, format="ISO8601")
        out["verdict"], out["reason"], out["level"] = verdict, reason, level
        out["findings"] = [json.loads(f) if isinstance(f, str) else f for f in findings]
        out["config_findings"] = config
        out["samples"] = samples.astype(np.int64)
        for c in RATES:
            out[c] = rates[c]
        for c in ETA_COLUMNS:
            out[c] = eta[c]
        out["since"], out["judged_at"] = stamps(since), stamps(judged_at)
        for c in ACTIVITY:
            out[c] = stamps(activity[c])
        return out

    snapshot = {c: state.state[c][live].copy() for c in STATE}  # the state as judged, for `consumers`
    live_keys = state.window.key_columns(live)  # taken now: `commit` may renumber the rows
    judged = JudgedCycle(now, consumers, changes, written, gone)
    judged.numbers_only = ~worded[at]
    judged.stamped = (None if np.isnan(state.stamped) else
                      micros(np.array([state.stamped]))[0].item().replace(tzinfo=dt.UTC))

    def commit() -> None:
        """The judged cycle is in the store: remember it as kept."""
        rows = live[at]
        state.written[live] = True
        for c, values in (("verdict", verdict), ("reason", reason), ("findings", findings_json),
                          ("eta_state", eta["eta_state"]), ("config_findings", config_json)):
            state.kept_text[c][rows] = values[at]
        for c in KEPT_NUMBERS:
            state.kept_numbers[c][rows] = numbers[c][at]
        state.kept_since[live] = since
        state.kept_judged_at[live] = judged_at
        state.calmer_since[live] = calmer_since
        for c in ACTIVITY:
            state.activity[c][live] = activity[c]
        for c in pull_rhythm.WAITS:
            state.waits[c][live] = activity[c]
        state.folded[live] = folded
        state.window.reordered.clear()
        state.written[gone_rows] = False
        state.stamped = now_s
        state.forget_gone()

    judged.commit = commit
    return judged


def keep(con: duckdb.DuckDBPyConnection, judged: JudgedCycle) -> None:
    """Write a judged cycle: the changed verdicts replace their rows, consumers gone lose theirs,
    every verdict judged afresh is stamped with this cycle's time, the transitions are appended."""
    if judged.gone is not None and judged.gone.num_rows:
        con.register("gone_batch", judged.gone)
        con.execute(sql.query("delete_verdicts_gone"))
        con.unregister("gone_batch")
    written = judged.written
    if written is not None and judged.numbers_only is not None and judged.numbers_only.any():
        # Most cycles only numbers move (a drain ETA): those rows get only their numbers and
        # activity written, which leaves the checkpoint fewer columns to write out.
        numbers = written.filter(pa.array(judged.numbers_only)).select([*KEY, *KEPT_NUMBERS, *ACTIVITY, *pull_rhythm.KEPT])
        con.register("verdict_numbers", numbers)
        (updated,), = con.execute(sql.query("update_verdict_numbers")).fetchall()
        con.unregister("verdict_numbers")
        # Any other count (a row missing, or a consumer's row twice): the whole rows, below.
        written = written.filter(pa.array(~judged.numbers_only)) if updated == numbers.num_rows else written
    if written is not None and written.num_rows:
        con.register("verdict_batch", written)
        update, insert = _statements("upsert_verdicts_current")
        (updated,), = con.execute(update).fetchall()
        if updated != written.num_rows:  # new consumers, or rows another writer removed (or doubled)
            con.execute(insert)
        con.unregister("verdict_batch")
    if judged.stamped is not None:
        con.execute(sql.query("stamp_verdicts_judged"), {"now": judged.at, "previous": judged.stamped})
    if not judged.changes.empty:
        changes = pa.table({
            "ts": pa.array(judged.changes["ts"], pa.timestamp("us", tz="UTC")),
            **{c: pa.array(judged.changes[c], pa.string()) for c in (*KEY, "from_verdict", "to_verdict", "reason")}})
        con.register("change_batch", changes)
        con.execute(sql.query("insert_verdict_changes"))
        con.unregister("change_batch")
    judged.silences = silencing.settle(con, judged.at)


def event_counts(con: duckdb.DuckDBPyConnection, now: dt.datetime, thresholds: Thresholds) -> pd.DataFrame:
    """Pin switches, naks and max-delivery hits per consumer in the health window (advisories are
    stored by the collector's other loop, so they are read, from the small recent end of the table)."""
    since = now - dt.timedelta(seconds=thresholds.health_window)
    return con.execute(sql.query("window_event_counts"), {"since": since}).df()


def load_window(store: Store, now: dt.datetime, thresholds: Thresholds) -> LiveState:
    """A collector's state at start, from the store: the health window's samples, the live state,
    the verdicts kept and each consumer's activity (looked up once in the samples where none is kept)."""
    if not store.exists():
        return LiveState(thresholds.health_window)
    return store.read(lambda con: LiveState.seeded(con, now, thresholds.health_window))


def judge_stored_cycle(store: Store, now: dt.datetime, thresholds: Thresholds,
                       state: LiveState | None = None) -> JudgedCycle:
    """Judging after a cycle's samples were committed (and added to `state`), in a write
    transaction of its own: judged from memory, then what changed is kept. Without a state, it is
    seeded from the store first (judge_cycle). The collector judges inside the cycle's own
    transaction instead (judge_in)."""
    if state is None:
        return store.write(lambda con: judge_cycle(con, now, thresholds))

    judged = store.write(lambda con: judge_in(con, now, thresholds, state))
    judged.commit()
    return judged


def judge_in(con: duckdb.DuckDBPyConnection, now: dt.datetime, thresholds: Thresholds,
             state: LiveState) -> JudgedCycle:
    """Judge from `state` (which holds the cycle's samples) and keep what changed, in the caller's
    write transaction: the collector's own, the one that wrote the samples, so a cycle is one
    transaction. Call `commit()` on the result once that transaction committed."""
    judged = judge(state, now, thresholds, event_counts(con, now, thresholds))
    keep(con, judged)
    return judged


def judge_cycle(con: duckdb.DuckDBPyConnection, now: dt.datetime, thresholds: Thresholds) -> JudgedCycle:
    """Seed a state from the store, judge and keep, in the caller's transaction (for callers that
    hold the store anyway and judge one cycle: the same path as the collector's, from a fresh start)."""
    state = LiveState.seeded(con, now, thresholds.health_window)
    judged = judge(state, now, thresholds, event_counts(con, now, thresholds))
    keep(con, judged)
    return judged


def _statements(name: str) -> list[str]:
    return [s for s in sql.query(name).split(";")
            if any(line.strip() and not line.strip().startswith("--") for line in s.splitlines())]
