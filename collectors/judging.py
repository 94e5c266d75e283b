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
from dataclasses import dataclass, field
from typing import Any

import duckdb
import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa

from jetwatch import sql
from jetwatch.collectors import silencing
from jetwatch.collectors.live_state import (
    ACTIVITY,
    KEPT_NUMBERS,
    LAST_KNOWN,
    NUMERIC_STATE,
    STATE,
    TIMES,
    LiveState,
    micros,
    stamps,
)
from jetwatch.health import cluster, easing, pull_rhythm
from jetwatch.health.cluster import UNLISTED, Evidence, EvidenceKey
from jetwatch.health.columns import floats
from jetwatch.health.config_findings import NONE, config_findings, held_resets, pull_findings
from jetwatch.health.eta import ETA_COLUMNS, drain_eta_columns, lately
from jetwatch.health.rules import (
    BY_NAME,
    COUNT_COLUMNS,
    DURATIONS,
    THRESHOLD_COLUMNS,
    THRESHOLD_INPUT,
    Thresholds,
    loss_within,
    rhythm_after,
    verdict_columns,
)
from jetwatch.health.verdicts import CLUSTER_VERDICTS, VERDICTS
from jetwatch.store.database import Store

KEY = ["account", "stream", "consumer"]
NO_SAMPLES = "no samples in the window yet"
NO_SAMPLES_FINDINGS = [{"verdict": "COLLECTING", "reason": NO_SAMPLES, "numbers": {"samples": 0}}]
QUIET = ("NO_PULLERS", "STALLED")  # verdicts whose reason says since when: their activity is kept fresh
LIMITS = ("is_pull", "filtered", "max_ack_pending", "max_waiting", "priority_policy", "ack_wait_ns",
          "priority_timeout_ns", "time_to_loss_seconds", "loss_limit", "stream_room_messages")
RATES = ("delivered_per_second", "acked_per_second", "redelivered_per_second")
CHANGE_COLUMNS = ["ts", *KEY, "from_verdict", "to_verdict", "reason", "from_since"]
LEVELS = {name: v.level for name, v in BY_NAME.items()}
CLUSTER_NAMES = frozenset(v.name for v in CLUSTER_VERDICTS)
_NO_CHANGES = pd.DataFrame({c: pd.Series(dtype="datetime64[ns, UTC]" if c in ("ts", "from_since") else object)
                            for c in CHANGE_COLUMNS})


class JudgedCycle:
    """What one cycle judged: every consumer of the live state with its state, limits, verdict,
    level, findings and since when (`consumers`, built when first asked for: the exporters need it,
    judging does not); this cycle's transitions; and what it writes. `commit()` once the store has
    it: the live state then remembers it as kept."""

    def __init__(self, at: dt.datetime, consumers: pd.DataFrame | Callable[[], pd.DataFrame],
                 changes: pd.DataFrame, written: pa.Table | None = None, gone: pa.Table | None = None,
                 remember: Callable[[], None] | None = None) -> None:
        self.at = at
        self._consumers = consumers
        self.changes = changes
        self.written = written  # the rows of verdicts_current this cycle replaced
        self.gone = gone  # consumers that left the live state
        self._remember = remember
        self.stamped: dt.datetime | None = None  # when the verdicts not written this cycle were judged
        # Of each row of `written`: only its numbers or activity changed (its words and since did not).
        self.numbers_only: np.ndarray | None = None
        # The silences that hold after this cycle (silences_open.sql's columns), once it is kept.
        self.silences = pd.DataFrame()
        # The consumers the cluster first showed this cycle it cannot serve, and when (epoch seconds)
        # the earliest of those shown and not yet named is due: a cycle judged then names it.
        self.cluster_new: list[ClusterShown] = []
        self.cluster_due: float | None = None
        # Consumers STALLED with their holders silent: CONNZ is asked whether those are gone or stopped.
        self.silent_holders: list[tuple[str, str, str]] = []

    @property
    def consumers(self) -> pd.DataFrame:
        if callable(self._consumers):
            self._consumers = self._consumers()
        return self._consumers

    def commit(self) -> None:
        """The judged cycle is in the store: the live state remembers it as kept."""
        if self._remember is not None:
            self._remember()


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


def _loss_seen(state: LiveState, columns: dict[str, np.ndarray], at_row: np.ndarray, thresholds: Thresholds,
               horizon: float, recreated_at: np.ndarray) -> None:
    """Since when each consumer's loss has been projected without a break (LOSING needs it to hold
    for --losing-after), into `columns["loss_seen_since"]`: the first sample of the trailing run of
    the window's samples (at or after `horizon`, and after the consumer was recreated, as every
    feature) that projected one within --loss-within (NaN where the latest does not). Read from
    the window's own samples, it is the same after a restart as before."""
    within = loss_within(columns, thresholds)
    since = np.full(len(at_row), np.nan)
    with np.errstate(invalid="ignore"):
        pick = np.flatnonzero(floats(columns["time_to_loss_seconds"]) <= within)
    if len(pick):
        w, rows = state.window, at_row[pick]
        t = w.t[:w.used, rows]
        with np.errstate(invalid="ignore"):
            t = np.where(t >= np.fmax(horizon, recreated_at[pick]), t, np.nan)  # its own, in the window
            broken = ~np.isnan(t) & ~(w.values["time_to_loss_seconds"][:w.used, rows] <= within[pick])
        order = np.arange(w.used)[:, None]
        last_break = np.where(broken, order, -1).max(axis=0)
        since[pick] = np.where(~np.isnan(t) & (order > last_break), t, np.inf).min(axis=0)
    columns["loss_seen_since"] = since


def _rules(state: LiveState, live: np.ndarray, columns: dict[str, np.ndarray], at_row: np.ndarray,
           pos: np.ndarray, counts: pd.DataFrame, thresholds: Thresholds
           ) -> tuple[np.ndarray, np.ndarray, list[Any], np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """health.rules over the window's features of the consumers with samples (`at_row`, at
    positions `pos` among the `live` ones), their limits (set by _said) and event counts beside: verdict, reason,
    findings, samples, onset and rates per live consumer (COLLECTING for one without samples).
    `columns["loss_seen_since"]` is read (set by _loss_seen)."""
    n, m = len(state.keys), len(live)
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
                     findings: list[Any], judged_at: np.ndarray, recreated: np.ndarray,
                     cluster_seen: Mapping[tuple[str, str, str], float]) -> None:
    """Hold the last known verdict of a consumer that is COLLECTING only for lack of fresh samples
    (the collector was stopped longer than the health window, or a server did not answer): a
    STALLED consumer never turns grey because the collector died with it. Its reason says when
    it was last judged; a consumer never judged before stays COLLECTING. A cluster verdict is
    over once a leader answered for the consumer since it was judged (a fresh sample naming one)
    and the cluster no longer shows it (`cluster_seen`), whatever its samples are too few to say
    yet; without a fresh sample it is held like any other."""
    kept = state.kept_text["verdict"][live]
    hold = (verdict == "COLLECTING") & pd.notna(kept) & (kept != "COLLECTING") & ~recreated
    for i in np.flatnonzero(hold):
        row = live[i]
        if kept[i] in CLUSTER_NAMES and state.keys[row] not in cluster_seen and \
                _served_since(state, row, state.kept_judged_at[row]):
            continue  # the cluster serves it again: COLLECTING in its own words
        text = str(state.kept_text["reason"][row])
        if not text.startswith(LAST_KNOWN):
            when = pd.Timestamp(state.kept_judged_at[live[i]] * 1e6, unit="us", tz="UTC")
            text = (f"{LAST_KNOWN}{when:%Y-%m-%d %H:%M:%S} UTC (too few fresh samples to judge again, "
                    f"the collector or the server was away): {text}")
        verdict[i], reason[i], findings[i] = kept[i], text, state.kept_text["findings"][live[i]]
        judged_at[i] = state.kept_judged_at[live[i]]


def _served_since(state: LiveState, row: int, judged: float) -> bool:
    """Whether the consumer's latest sample names a leader and was taken after `judged` (epoch s)."""
    leader, ts = state.state["leader"][row], state.state["ts"][row]
    try:
        taken = pd.Timestamp(ts).timestamp()
    except (ValueError, TypeError):
        return False
    return bool(leader) and taken == taken and taken > judged


def _say_recreated(verdict: np.ndarray, reason: np.ndarray, findings: list[Any], recreated_at: np.ndarray) -> None:
    """A consumer recreated within the window and still collecting its own samples says so
    (rather than that samples are missing)."""
    for i in np.flatnonzero((verdict == "COLLECTING") & ~np.isnan(recreated_at)):
        when = pd.Timestamp(recreated_at[i] * 1e6, unit="us", tz="UTC")
        reason[i] = f"recreated (seen {when:%H:%M:%S} UTC): judged on its own samples from then; {reason[i]}"
        findings[i] = [{**findings[i][0], "reason": reason[i]}, *findings[i][1:]]


def _own(columns: Mapping[str, np.ndarray], thresholds: Thresholds, name: str) -> np.ndarray:
    """Each consumer's threshold `name`: its own where its metadata sets one, else the setting."""
    setting = float(getattr(thresholds, name))
    own = columns.get(THRESHOLD_INPUT + name)
    return np.full(len(columns["last_seconds"]), setting) if own is None else np.where(np.isnan(own), setting, own)


def _eta(state: LiveState, live: np.ndarray, columns: dict[str, np.ndarray], at_row: np.ndarray, pos: np.ndarray,
         verdict: np.ndarray, thresholds: Thresholds) -> dict[str, np.ndarray]:
    """The drain ETA (health/eta.py) of every live consumer: the backlog now, its trend over the
    window; none where nothing was acknowledged lately (a stall, a crashed fleet) or nobody pulls
    (as the rules judged it, over the consumer's own pull rhythm)."""
    m = len(live)
    slope, slope_se = np.full(m, np.nan), np.full(m, np.nan)
    acked, pulling = np.ones(m, dtype=bool), np.ones(m, dtype=bool)
    if len(at_row):
        slope[pos], slope_se[pos] = columns["backlog_slope"], columns["backlog_slope_se"]
        acked[pos], pulling[pos] = lately(columns, _own(columns, thresholds, "stalled_after"),
                                          _own(columns, thresholds, "no_pullers_after"))
    pending = np.nan_to_num(state.numbers("num_pending")[live])
    in_flight = np.nan_to_num(state.numbers("num_ack_pending")[live])
    return drain_eta_columns({
        "backlog": pending + in_flight, "backlog_slope": slope, "backlog_slope_se": slope_se,
        "paused": state.state["paused"][live], "no_pullers": (verdict == "NO_PULLERS") & ~pulling,
        "pin_idle": verdict == "PIN_IDLE", "acked": acked & (verdict != "STALLED"),
        "is_pull": state.state["is_pull"][live]})


@dataclass(frozen=True)
class PullsAnnounced:
    """The pull settings workers announced lately (collectors/pull_settings.py `current`), per
    (account, stream, consumer), and the version of the server the collector is connected to."""

    by_consumer: Mapping[tuple[str, str, str], Sequence[Mapping[str, Any]]]
    server_version: str | None = None
    # Of consumers whose holders went silent: the announcing workers CONNZ finds connected, and
    # those whose connections closed (collectors/holder_connections.py).
    holders: Mapping[tuple[str, str, str], tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)


PULL_LIMITS = ("priority_policy", "priority_timeout_ns", "max_ack_pending", "priority_groups")


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


@dataclass
class _Said:
    """What judging says of every live consumer (arrays in the order of the live rows), as the rules
    said it and then as it stands once held, eased and dated (_settle)."""

    verdict: np.ndarray
    reason: np.ndarray
    findings: list[Any]
    samples: np.ndarray
    onset: np.ndarray
    rates: dict[str, np.ndarray]
    eta: dict[str, np.ndarray]
    config: list[Any]
    config_json: np.ndarray
    activity: dict[str, np.ndarray]
    folded: np.ndarray
    recreated: np.ndarray  # deleted and recreated under its name since its verdict was kept
    judged_at: np.ndarray
    # Set by _settle:
    calmer_since: np.ndarray = field(default_factory=lambda: np.zeros(0))
    findings_json: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    since: np.ndarray = field(default_factory=lambda: np.zeros(0))
    unhealthy_since: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # Set by _cluster_verdicts: since when the cluster has shown, without a break, that it cannot serve each;
    # of those, the ones first shown this cycle; and when the earliest not yet named is due.
    cluster_seen: dict[tuple[str, str, str], float] = field(default_factory=dict)
    cluster_new: list[ClusterShown] = field(default_factory=list)
    cluster_due: float | None = None

    @property
    def numbers(self) -> dict[str, np.ndarray]:
        return {"samples": self.samples, **self.rates, **{c: self.eta[c] for c in ETA_COLUMNS[1:]}}


def _features(state: LiveState, live: np.ndarray, position: np.ndarray, now: dt.datetime, thresholds: Thresholds
              ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """The window's features of the live consumers with samples, the pull rhythm's beside, and each
    consumer's activity: (columns, activity, folded, their rows `at_row`, their positions among the
    live ones `pos`, read from `position`)."""
    own = {THRESHOLD_INPUT + name: state.numbers(THRESHOLD_INPUT + name)[live] for name in DURATIONS}
    columns = state.feature_columns(now, live, rhythm_after=rhythm_after(thresholds, own, state.numbers("ack_wait_ns")[live]))
    activity, folded = state.recent_activity(now, live, pull_rhythm.counted_from(thresholds))
    at_row = columns.pop("row", np.zeros(0, dtype=np.int64))
    pos = position[at_row]
    if len(at_row):
        columns.update(pull_rhythm.features({c: activity[c][pos] for c in pull_rhythm.WAITS}, columns))
    return columns, activity, folded, at_row, pos


def _positions(state: LiveState, live: np.ndarray) -> np.ndarray:
    """Each row's position among the live ones (-1: not live)."""
    position = np.full(len(state.keys), -1, dtype=np.int64)
    position[live] = np.arange(len(live))
    return position


def _config(state: LiveState, live: np.ndarray, position: np.ndarray, columns: dict[str, np.ndarray],
            pos: np.ndarray, pulls: PullsAnnounced | None, now_s: float, thresholds: Thresholds,
            recreated: np.ndarray, cluster_findings: Mapping[tuple[str, str, str], dict[str, Any]]) -> list[Any]:
    """Config findings beside the verdict (never changing it), from the same features and limits,
    the pull settings the workers announced, the cluster's replicas not current under a leader
    that still serves, and a reset the window has moved past, shown for a while
    (reset_shown_for) from what was kept."""
    config: list[Any] = [NONE] * len(live)
    if len(pos):
        for p, f in zip(pos.tolist(), config_findings(columns)):
            if f:
                config[p] = f
    if pulls is not None and pulls.by_consumer:
        _pull_findings(state, position, config, pulls)
    for key, found in cluster_findings.items():  # few: only while a replica is not current
        row = state.window.rows.get(key)
        if row is not None and row < len(position) and position[row] >= 0:
            config[int(position[row])] = [*config[int(position[row])], found]
    return held_resets(config, state.kept_text["config_findings"][live], now_s, thresholds.reset_shown_for, recreated)


def _said(state: LiveState, live: np.ndarray, now: dt.datetime, thresholds: Thresholds, counts: pd.DataFrame,
          pulls: PullsAnnounced | None, cluster_findings: Mapping[tuple[str, str, str], dict[str, Any]]) -> _Said:
    """The rules over the live consumers' features, limits and event counts beside: what they say
    now, before what was kept is held or eased into."""
    now_s = now.timestamp()
    position = _positions(state, live)
    columns, activity, folded, at_row, pos = _features(state, live, position, now, thresholds)
    recreated_at = np.full(len(live), np.nan)
    recreated_at[pos] = columns.pop("recreated_ts", np.full(len(at_row), np.nan))
    # Deleted and recreated under its name since its verdict was kept: a new consumer, judged on
    # its own samples only (the kept verdict is the old one's: neither held nor eased into).
    with np.errstate(invalid="ignore"):
        recreated = recreated_at > state.kept_judged_at[live]
    for c in LIMITS:
        columns[c] = (state.numbers(c) if c in NUMERIC_STATE else state.state[c])[at_row]
    for c in THRESHOLD_COLUMNS:  # each consumer's own, from its metadata (NaN: the setting)
        columns[c] = state.numbers(c)[at_row]
    _loss_seen(state, columns, at_row, thresholds, now_s - thresholds.health_window, recreated_at[pos])
    verdict, reason, findings, samples, onset, rates = _rules(state, live, columns, at_row, pos, counts, thresholds)
    eta = _eta(state, live, columns, at_row, pos, verdict, thresholds)
    config = _config(state, live, position, columns, pos, pulls, now_s, thresholds, recreated, cluster_findings)
    _say_recreated(verdict, reason, findings, recreated_at)
    return _Said(verdict, reason, findings, samples, onset, rates, eta, config, _findings_json(config), activity,
                 folded, recreated, np.full(len(live), now_s))


@dataclass(frozen=True)
class ClusterShown:
    """A consumer the cluster first showed this cycle it cannot serve: the evidence, and when
    (epoch seconds, the server's clock) its verdict is named if the evidence holds until then."""

    key: tuple[str, str, str]
    evidence: Evidence
    due: float


def _cluster_verdicts(state: LiveState, live: np.ndarray, said: _Said, evidence: Mapping[EvidenceKey, Evidence],
                      now_s: float, thresholds: Thresholds) -> None:
    """The consumers the cluster has shown for `no_leader_after` that it cannot serve take the
    verdict its evidence makes, since it was first shown, in place of what the rules said of
    their last known (and so not fresh) samples. A leader election shows it for a cycle or two."""
    said.cluster_seen, said.cluster_new, said.cluster_due = {}, [], None
    if not evidence and not state.cluster_seen:
        return
    keys = [state.keys[r] for r in live.tolist()]
    for i, ev in cluster.about(keys, evidence):
        first = said.cluster_seen[keys[i]] = state.cluster_seen.get(keys[i], now_s - ev.held_s)
        due = first + thresholds.no_leader_after
        if keys[i] not in state.cluster_seen:
            said.cluster_new.append(ClusterShown(keys[i], ev, due))
        if now_s < due:
            said.cluster_due = due if said.cluster_due is None else min(said.cluster_due, due)
            continue
        row = live[i]
        found = cluster.finding(ev, state.state["leader"][row], _as_of(state.state["ts"][row]))
        said.verdict[i], said.reason[i], said.findings[i] = ev.verdict, found["reason"], [found]
        said.onset[i] = first


def _say_holders(state: LiveState, live: np.ndarray, said: _Said, pulls: PullsAnnounced | None
                 ) -> list[tuple[str, str, str]]:
    """The STALLED consumers whose holders went silent (returned), each told, where CONNZ said so,
    whether the workers that announced their pulls are gone (connections closed) or only stopped."""
    silent = []
    for i in np.flatnonzero(said.verdict == "STALLED"):
        found = said.findings[i]
        if not isinstance(found, list) or not found or (found[0].get("numbers") or {}).get("holder") != "silent":
            continue
        key = state.keys[live[i]]
        silent.append(key)
        connected, gone = pulls.holders.get(key, ((), ())) if pulls is not None else ((), ())
        if connected:
            words = (f"; CONNZ: {', '.join(connected)} still connected: stopped, not gone (hung, or waiting on "
                     "something)")
            numbers = {"holders": "connected", "holders_named": ", ".join(connected)}
        elif gone:
            words = f"; CONNZ: {', '.join(gone)} gone (their connections closed)"
            numbers = {"holders": "gone", "holders_named": ", ".join(gone)}
        else:
            continue
        said.reason[i] = str(said.reason[i]) + words
        said.findings[i] = [{**found[0], "reason": str(found[0].get("reason", "")) + words,
                             "numbers": {**(found[0].get("numbers") or {}), **numbers}}, *found[1:]]
    return silent


def _as_of(ts: object) -> str | None:
    """A sample's time as the words of a finding say it (None: not known)."""
    try:
        t = pd.Timestamp(ts)
    except (ValueError, TypeError):
        return None
    if pd.isna(t):
        return None
    t = t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")
    return f"{t:%Y-%m-%d %H:%M:%S} UTC"


def _settle(state: LiveState, live: np.ndarray, said: _Said, now_s: float, thresholds: Thresholds) -> None:
    """What the rules said against what was kept: a last known verdict held where fresh samples
    are missing; no false comfort (the kept verdict stands until the calmer one has held for
    clear_after); since, the incident's start, kept while the verdict stays."""
    kept = state.kept_text["verdict"][live]
    _hold_last_known(state, live, said.verdict, said.reason, said.findings, said.judged_at, said.recreated,
                     said.cluster_seen)
    unkept = np.where(said.recreated, np.array(None, dtype=object), kept)  # a recreated consumer eases from nothing
    held_back, said.calmer_since = easing.ease(said.verdict, unkept, state.calmer_since[live], now_s,
                                               thresholds.clear_after)
    for i in np.flatnonzero(held_back):
        said.verdict[i], said.reason[i] = kept[i], state.kept_text["reason"][live[i]]
        said.findings[i] = state.kept_text["findings"][live[i]]
        said.onset[i] = np.nan
    _say_unlisted(state, live, said)
    said.findings_json = _findings_json(said.findings)
    same = kept == said.verdict
    said.since = easing.since(said.onset, same & ~said.recreated, state.kept_since[live], now_s)
    said.unhealthy_since = easing.unhealthy_since(said.verdict, said.since, unkept, state.kept_unhealthy_since[live])


HELD_UNLISTED = frozenset(v.name for v in VERDICTS if v.level in ("critical", "warning"))


def _say_unlisted(state: LiveState, live: np.ndarray, said: _Said) -> None:
    """A consumer the server no longer lists, and nothing said was removed (LiveState.unlisted),
    says so: a verdict that alerted stays, with its last known words (nothing that was red turns
    grey or vanishes); any other is not known any more (COLLECTING), never a fresh OK."""
    for key, since in state.unlisted.items():
        row = state.window.rows.get(key)
        i = int(np.searchsorted(live, row)) if row is not None else len(live)
        if i >= len(live) or live[i] != row:
            continue
        kept = state.kept_text["verdict"][row]
        before = str(state.kept_text["reason"][row] if isinstance(kept, str) else said.reason[i])
        before = before.split("; last known: ", 1)[1] if before.startswith(UNLISTED) else before
        when = pd.Timestamp(since * 1e6, unit="us", tz="UTC")
        reason = (f"{UNLISTED}{when:%Y-%m-%d %H:%M:%S} UTC, and no DELETED advisory said it was removed: kept until "
                  f"it is listed again, removed, or forgotten (`jetwatch forget`); last known: {before}")
        if kept in HELD_UNLISTED:
            said.verdict[i], said.findings[i] = kept, _marked_unlisted(state.kept_text["findings"][row], since)
            said.judged_at[i] = state.kept_judged_at[row]
        else:
            said.verdict[i] = "COLLECTING"
            said.findings[i] = [{"verdict": "COLLECTING", "reason": reason, "numbers": {"unlisted_since": since}}]
            said.onset[i] = np.nan
        said.reason[i] = reason


def _marked_unlisted(findings: object, since: float) -> object:
    """Kept findings (JSON text) with `unlisted_since` in the first one's numbers: its next step
    is then about a consumer the server no longer lists (health/advice.py), not its old verdict's."""
    try:
        found = json.loads(findings) if isinstance(findings, str) else findings
    except ValueError:
        return findings
    if not isinstance(found, list) or not found or not isinstance(found[0], dict):
        return findings
    first = {**found[0], "numbers": {**(found[0].get("numbers") or {}), "unlisted_since": since}}
    return [first, *found[1:]]


def _changed(state: LiveState, live: np.ndarray, said: _Said) -> tuple[np.ndarray, np.ndarray]:
    """Which live consumers' kept rows must be written (`changed`), and of those which changed in
    their words or since, not only in their numbers or activity (`worded`)."""
    worded = ~state.written[live] | (state.kept_text["verdict"][live] != said.verdict)
    worded |= said.reason != state.kept_text["reason"][live]
    worded |= said.findings_json != state.kept_text["findings"][live]
    worded |= said.config_json != state.kept_text["config_findings"][live]
    worded |= said.eta["eta_state"] != state.kept_text["eta_state"][live]
    worded |= _differ(said.calmer_since, state.calmer_since[live])
    worded |= _differ(said.unhealthy_since, state.kept_unhealthy_since[live])
    changed = worded.copy()
    numbers = said.numbers
    for c in KEPT_NUMBERS:
        changed |= _differ(numbers[c], state.kept_numbers[c][live], 0.0 if c == "samples" else NUMBER_TOLERANCE)
    quiet = np.isin(said.verdict, QUIET)
    for c in ACTIVITY:
        changed |= quiet & _differ(said.activity[c], state.activity[c][live])
    for c in pull_rhythm.KEPT:  # a wait for a pull ended: rare, and kept for every verdict
        changed |= _differ(said.activity[c], state.waits[c][live])
    return changed, worded


def _levels(verdict: np.ndarray) -> np.ndarray:
    return np.array([LEVELS[v] for v in verdict.tolist()], dtype=object)


def _written(state: LiveState, live: np.ndarray, at: np.ndarray, said: _Said) -> pa.Table:
    """The rows of verdicts_current to write: the live consumers at positions `at`."""
    keys = state.window.key_columns(live[at])
    numbers, activity = said.numbers, said.activity
    return pa.table({
        **{c: pa.array(keys[i], pa.string()) for i, c in enumerate(KEY)},
        "verdict": pa.array(said.verdict[at], pa.string()), "level": pa.array(_levels(said.verdict[at]), pa.string()),
        "reason": pa.array(said.reason[at], pa.string()), "findings": pa.array(said.findings_json[at], pa.string()),
        "config_findings": pa.array(said.config_json[at], pa.string()),
        "since": _stamp_array(said.since[at]),
        "judged_at": _stamp_array(said.judged_at[at]),
        "samples": pa.array(said.samples[at].astype(np.int64), pa.int64()),
        **{c: pa.array(numbers[c][at], pa.float64(), from_pandas=True) for c in (*RATES, *ETA_COLUMNS[1:])},
        "eta_state": pa.array(said.eta["eta_state"][at], pa.string()),
        **{c: _stamp_array(activity[c][at]) for c in ACTIVITY},
        **{c: (_stamp_array(activity[c][at]) if c == "pull_wait_ended" else
               pa.array(activity[c][at], pa.float64(), from_pandas=True)) for c in pull_rhythm.KEPT},
        "calmer_since": _stamp_array(said.calmer_since[at]),
        "unhealthy_since": _stamp_array(said.unhealthy_since[at]),
    })


def _gone(state: LiveState) -> tuple[np.ndarray, pa.Table]:
    """The rows with a kept verdict that are no longer live, and their keys as a table."""
    n = len(state.keys)
    rows = np.flatnonzero(state.written[:n] & ~state.live[:n])
    keys = [state.keys[r] for r in rows]
    return rows, pa.table({c: pa.array([k[i] for k in keys], pa.string()) for i, c in enumerate(KEY)})


def _transitions(state: LiveState, live: np.ndarray, said: _Said, now_s: float) -> pd.DataFrame:
    """verdict_changes' rows: each live consumer whose verdict is not the one kept."""
    kept = state.kept_text["verdict"][live]
    moved = np.flatnonzero(kept != said.verdict)
    if not len(moved):
        return _NO_CHANGES.copy()
    keys = [state.keys[r] for r in live[moved]]
    return pd.DataFrame({
        "ts": [pd.Timestamp(now_s * 1e6, unit="us", tz="UTC")] * len(moved), "account": [k[0] for k in keys],
        "stream": [k[1] for k in keys], "consumer": [k[2] for k in keys], "from_verdict": kept[moved],
        "to_verdict": said.verdict[moved], "reason": said.reason[moved].astype(str),
        # Since when the old verdict had held: what alerting needs to resolve what it fired.
        "from_since": stamps(state.kept_since[live[moved]]).to_numpy(),
    }, columns=CHANGE_COLUMNS)


def _consumers_frame(keys: tuple[np.ndarray, np.ndarray, np.ndarray], snapshot: dict[str, np.ndarray],
                     said: _Said) -> pd.DataFrame:
    """JudgedCycle.consumers: every live consumer's state as judged (`snapshot`), with what was said."""
    # Every column at once: a frame grown a column at a time copies its index and blocks each time
    # (most of the time of a small fleet's cycle).
    out: dict[str, Any] = dict(zip(KEY, keys))
    for c in STATE:
        out[c] = pd.to_datetime(snapshot[c], utc=True, format="ISO8601").array if c in TIMES else snapshot[c]
    out["verdict"], out["reason"], out["level"] = said.verdict, said.reason, _levels(said.verdict)
    # Lists of findings held as one object each (a list of equal-length lists would be read as a table).
    out["findings"] = np.fromiter((json.loads(f) if isinstance(f, str) else f for f in said.findings), dtype=object,
                                  count=len(said.findings))
    out["config_findings"] = np.fromiter(said.config, dtype=object, count=len(said.config))
    out["samples"] = said.samples.astype(np.int64)
    for c in RATES:
        out[c] = said.rates[c]
    for c in ETA_COLUMNS:
        out[c] = said.eta[c]
    out["since"], out["judged_at"] = stamps(said.since).array, stamps(said.judged_at).array
    out["unhealthy_since"] = stamps(said.unhealthy_since).array
    for c in ACTIVITY:
        out[c] = stamps(said.activity[c]).array
    return pd.DataFrame(out, copy=False)


@dataclass
class _Remember:
    """What a judged cycle leaves in the live state once the store has it (JudgedCycle.commit)."""

    state: LiveState
    live: np.ndarray
    at: np.ndarray  # positions (among `live`) of the rows written
    gone_rows: np.ndarray
    said: _Said
    now_s: float

    def __call__(self) -> None:
        state, live, said = self.state, self.live, self.said
        rows = live[self.at]
        state.written[live] = True
        for c, values in (("verdict", said.verdict), ("reason", said.reason), ("findings", said.findings_json),
                          ("eta_state", said.eta["eta_state"]), ("config_findings", said.config_json)):
            state.kept_text[c][rows] = values[self.at]
        numbers = said.numbers
        for c in KEPT_NUMBERS:
            state.kept_numbers[c][rows] = numbers[c][self.at]
        state.kept_since[live] = said.since
        state.kept_judged_at[live] = said.judged_at
        state.calmer_since[live] = said.calmer_since
        state.kept_unhealthy_since[live] = said.unhealthy_since
        for c in ACTIVITY:
            state.activity[c][live] = said.activity[c]
        for c in pull_rhythm.WAITS:
            state.waits[c][live] = said.activity[c]
        state.folded[live] = said.folded
        state.window.reordered.clear()
        state.written[self.gone_rows] = False
        state.stamped = self.now_s
        state.cluster_seen = said.cluster_seen
        state.forget_gone()


def judge(state: LiveState, now: dt.datetime, thresholds: Thresholds, counts: pd.DataFrame,
          pulls: PullsAnnounced | None = None, evidence: Mapping[EvidenceKey, Evidence] | None = None,
          cluster_findings: Mapping[tuple[str, str, str], dict[str, Any]] | None = None) -> JudgedCycle:
    """Judge every live consumer from the in-memory state and find what changed against the
    verdicts kept: pure, nothing is written and `state` is unchanged until `commit`. `pulls`: the
    pull settings the workers announced lately, per consumer, and the server's version; `evidence`:
    what the cycle showed of the cluster's trouble serving consumers (health/cluster.py);
    `cluster_findings`: those it serves with some replicas not current, a finding each."""
    live = np.flatnonzero(state.live[:len(state.keys)])
    now_s = now.timestamp()
    said = _said(state, live, now, thresholds, counts, pulls, cluster_findings or {})
    silent = _say_holders(state, live, said, pulls)
    _cluster_verdicts(state, live, said, evidence or {}, now_s, thresholds)
    _settle(state, live, said, now_s, thresholds)
    changed, worded = _changed(state, live, said)
    at = np.flatnonzero(changed)
    gone_rows, gone = _gone(state)
    snapshot = {c: state.state[c][live] for c in STATE}  # the state as judged (indexing by `live` copies it)
    live_keys = state.window.key_columns(live)  # taken now: `commit` may renumber the rows
    judged = JudgedCycle(now, lambda: _consumers_frame(live_keys, snapshot, said), _transitions(state, live, said, now_s),
                         _written(state, live, at, said), gone, _Remember(state, live, at, gone_rows, said, now_s))
    judged.numbers_only = ~worded[at]
    judged.cluster_new, judged.cluster_due = said.cluster_new, said.cluster_due
    judged.silent_holders = silent
    judged.stamped = (None if np.isnan(state.stamped) else
                      micros(np.array([state.stamped]))[0].item().replace(tzinfo=dt.UTC))
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
