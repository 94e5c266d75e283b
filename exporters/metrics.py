"""Prometheus exposition of the collector's current cycle: what /metrics says, and how it is rendered.

Every metric is declared once in `METRICS` (name, type, help, labels); docs/metrics.md's
table is generated from it (`jetwatch metrics`) and the custom collector below emits exactly
these families from the Snapshot the collector hands over (exporters/cycle_snapshot.py). Nothing
registers at import time: exporters/metrics_server.py owns the CollectorRegistry and serves the
text rendered once per cycle.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from jetwatch.core.errors import JetwatchError
from jetwatch.core.pin_announce import holder_key
from jetwatch.core.pin_words import pin_holder
from jetwatch.core.settings import SETTINGS
from jetwatch.exporters.cycle_snapshot import DURATION_BUCKETS, Snapshot
from jetwatch.health import failover
from jetwatch.health.config_findings import KINDS as CONFIG_KINDS
from jetwatch.health.verdicts import VERDICT_NAMES

CONSUMER_LABELS = ("cluster", "account", "stream", "consumer", "group")
CARDINALITIES = ("auto", "non_ok", "all")
# Under `auto`, every consumer's series up to this many consumers: the setting's default.
ALL_UP_TO: int = next(s.default for s in SETTINGS if s.name == "metrics_all_up_to")


@dataclass(frozen=True)
class MetricDef:
    name: str
    type: str  # gauge, counter, histogram, info
    help: str
    labels: tuple[str, ...] = ()
    scope: str = "fleet"  # consumer: bounded by --metrics-cardinality; fleet and collector: always

    @property
    def exposed(self) -> str:
        """The name as scraped: counters end in _total, info metrics in _info."""
        return self.name + {"counter": "_total", "info": "_info"}.get(self.type, "")


def _c(name: str, type_: str, help_: str, *extra: str) -> MetricDef:
    return MetricDef(name, type_, help_, CONSUMER_LABELS + extra, "consumer")


METRICS: tuple[MetricDef, ...] = (
    _c("jetwatch_consumer_pending_messages", "gauge", "Messages not yet delivered (num_pending)."),
    _c("jetwatch_consumer_ack_pending_messages", "gauge", "Messages delivered and not yet acknowledged (num_ack_pending)."),
    _c("jetwatch_consumer_ack_pending_limit_messages", "gauge", "max_ack_pending, when the consumer has one."),
    _c("jetwatch_consumer_waiting_requests", "gauge", "Pull requests waiting (num_waiting)."),
    _c("jetwatch_consumer_waiting_limit_requests", "gauge", "max_waiting, when the consumer has one."),
    _c("jetwatch_consumer_redelivered_messages", "gauge", "Messages redelivered and not yet acknowledged (num_redelivered, a gauge)."),
    _c("jetwatch_consumer_paused", "gauge", "1 while the consumer is paused."),
    _c("jetwatch_consumer_config_finding", "gauge", "1 for each config finding of the consumer (settings that defeat themselves, a reset; never its verdict), by kind: `max_ack_pending_reached`, `max_waiting_reached`, `ack_wait_short`, `reset`, or from the workers' announced pull settings `pull_expires_past_pin_timeout`, `min_ack_pending_unreachable`, `min_pending_without_overflow`, or from the cluster `replica_not_current` (its leader serves with a replica offline or behind: one more failure stops it); absent without one. Where only non-OK consumers are exported, an OK consumer with a config finding is exported too.", "kind"),
    _c("jetwatch_consumer_time_to_loss_seconds", "gauge", "Seconds until the stream's limits (max_age, max_msgs, max_bytes with discard old) remove messages the consumer has not processed, at the current arrival and acknowledgement rates; 0: they already have; absent where no loss is in sight."),
    _c("jetwatch_consumer_stream_room_messages", "gauge", "Messages the consumer's stream still takes before its max_msgs or max_bytes refuses publishes (discard new; max_bytes in messages of the stream's mean size); under 1: full, every publish refused (the STREAM_FULL verdict); absent where the stream discards old messages or has no such limit, and for consumers of accounts other than the collector's own (their streams are not listed)."),
    _c("jetwatch_consumer_oldest_unacked_age_seconds", "gauge", "Age of the oldest unacknowledged message (the first after the ack floor that the filter matches), from the stream's timestamp or, where it could not be read, an estimate (the store and the pages say which); absent with nothing unacknowledged."),
    _c("jetwatch_consumer_oldest_undelivered_age_seconds", "gauge", "Age of the oldest message not yet delivered (the first after the delivered sequence that the filter matches); absent with nothing pending."),
    _c("jetwatch_consumer_drain_eta_seconds", "gauge", "Time until the backlog (pending + in flight) is gone at the net drain rate of the health window; pull consumers that drain only (absent when not draining, paused, nobody pulls or the pin holder is idle)."),
    _c("jetwatch_consumer_verdict", "gauge", "1 for the consumer's current verdict (label verdict), judged after each cycle.", "verdict"),
    _c("jetwatch_consumer_verdict_since_timestamp_seconds", "gauge", "Since when the current verdict has held (Unix time).", "verdict"),
    _c("jetwatch_consumer_silenced", "gauge", "1 while an operator's silence holds back the alerts of the consumer's verdict (label verdict: the verdict silenced); absent otherwise. The verdict itself is still exported as judged: the alert rules hold back with `unless on (...) jetwatch_consumer_silenced`.", "verdict"),
    _c("jetwatch_consumer_silenced_until_timestamp_seconds", "gauge", "When the silence of the consumer's verdict expires (Unix time), unless the verdict turns into another that alerts first.", "verdict"),
    _c("jetwatch_consumer_pinned", "gauge", "pinned_client consumers: 1 while a client holds the pin."),
    _c("jetwatch_consumer_pin_age_seconds", "gauge", "How long the current pin has been held."),
    _c("jetwatch_consumer_pin", "info", "The pin's id and its holder as the worker announced it (`holder`: the name, cut to 64 characters, or `unannounced`; `pin_holder`: the holder as the pages and alerts say it, `worker-a · verified` or `unannounced …9n1AbC`).", "pinned_id", "holder", "pin_holder"),
    _c("jetwatch_consumer_pin_switches", "counter", "Pins captured by this collector since it started."),
    _c("jetwatch_consumer_unpins", "counter", "Unpins captured by this collector since it started, by reason (`admin`, `timeout`, or `other` for any other).", "reason"),
    _c("jetwatch_consumer_pin_moves", "counter", "Pin switches by cause (`operator_unpin`, `leader_change`, `deploy`, `holder_disconnected`, `priority_timeout`, `unknown`), counted by this collector since it started, each once its cause is settled (--deploy-window after the pin ended). The Pins page says each one's cause in words.", "cause"),
    _c("jetwatch_consumer_failover", "gauge", "pinned_client consumers: 1 for the group's failover readiness now (label `readiness`: `standby`, a client's pull waits beyond the holder's; `no_standby`, if the holder stops, work stops until a new client pulls; `no_holder`, nothing is pinned). Exported for every pinned_client consumer without a standby, whatever --metrics-cardinality.", "readiness"),
    _c("jetwatch_consumer_dropped_messages", "counter", "Messages the consumer dropped unprocessed, captured by this collector since it started, by reason: `max_deliver` (delivered max_deliver times, never acknowledged), `terminated` (a client sent +TERM) or `removed` (removed from the stream while still owed: its limits, a purge or a delete; lost, not poison). The Consumer page and `status --json` list them. Exported for every consumer that dropped one, whatever --metrics-cardinality (`JetwatchConsumerDroppedMessages` alerts on it).", "reason"),
    MetricDef("jetwatch_consumers", "gauge", "Consumers in the live state per verdict (always exported).", ("verdict",)),
    MetricDef("jetwatch_pin_switches", "counter", "Pins captured by this collector since it started, all consumers."),
    MetricDef("jetwatch_unpins", "counter", "Unpins captured by this collector since it started, all consumers, by reason (`admin`, `timeout`, or `other` for any other).", ("reason",)),
    MetricDef("jetwatch_pin_moves", "counter", "Pin switches by cause, all consumers, counted since the collector started once each cause is settled.", ("cause",)),
    MetricDef("jetwatch_pinned_groups", "gauge", "pinned_client consumers by failover readiness (`standby`, `no_standby`, `no_holder`; always exported).", ("readiness",)),
    MetricDef("jetwatch_dropped_messages", "counter", "Messages consumers dropped unprocessed, captured by this collector since it started, all consumers, by reason (`max_deliver`, `terminated` or `removed`).", ("reason",)),
    MetricDef("jetwatch_collector_cycle_duration_seconds", "histogram", "Time a sampling cycle took, sampling to verdicts kept.", (), "collector"),
    MetricDef("jetwatch_collector_cycles", "counter", "Sampling cycles completed since start.", (), "collector"),
    MetricDef("jetwatch_collector_last_cycle_timestamp_seconds", "gauge", "When the last successful cycle ended (Unix time, on the NATS server's clock), by the collector's `cluster`: how fresh that cluster's data is (`JetwatchCollectorSilent` names the cluster).", ("cluster",), "collector"),
    MetricDef("jetwatch_collector_capture_backlog_messages", "gauge", "Advisories in the capture stream not yet stored.", (), "collector"),
    MetricDef("jetwatch_collector_every_consumer_exported", "gauge", "1 while every consumer's series are exported (`--metrics-cardinality all`, or `auto` with at most --metrics-all-up-to consumers); 0 while only non-OK consumers' are, so a panel without a consumer means it is OK, not gone.", (), "collector"),
    MetricDef("jetwatch_collector_rejects", "counter", "Inputs rejected (malformed samples or advisories) since start.", (), "collector"),
    MetricDef("jetwatch_collector_capture_gaps", "counter", "Gaps found in the advisory capture since start: advisories the capture stream dropped or lost before they were stored.", (), "collector"),
    MetricDef("jetwatch_collector_last_capture_gap_timestamp_seconds", "gauge", "When the newest gap in the stored advisory record was found (Unix time; kept across restarts, absent while there is none): pin history is incomplete around it.", (), "collector"),
)
BY_NAME: dict[str, MetricDef] = {m.name: m for m in METRICS}


def reference_markdown() -> str:
    """docs/metrics.md's table, generated from METRICS (`jetwatch metrics`)."""
    lines = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for m in METRICS:
        labels = ", ".join(f"`{x}`" for x in m.labels)
        note = " Per consumer: bounded by `--metrics-cardinality`." if m.scope == "consumer" else ""
        lines.append(f"| `{m.exposed}` | {m.type} | {labels} | {m.help}{note} |")
    return "\n".join(lines)


# The info metric's values, which are labels of the info series, not of the family.
INFO_VALUES = ("pinned_id", "holder", "pin_holder")
HOLDER_LABEL_CHARS = 64


def holder_label(holder: tuple[str, str] | None) -> str:
    """The `holder` label of a pin: the announced name, cut so a long name cannot blow up a series."""
    return holder[0][:HOLDER_LABEL_CHARS] if holder else "unannounced"


def pin_holder_label(pin: str, holder: tuple[str, str] | None) -> str:
    """The `pin_holder` label of a pin: its holder in the pages' words (the name cut as in `holder`)."""
    return pin_holder(pin, holder_label(holder) if holder else None, holder[1] if holder else None)


def _label(values: object) -> np.ndarray:
    s = pd.Series(values, dtype=object)
    return s.where(s.notna(), "").astype(str).to_numpy()


def _group(frame: pd.DataFrame) -> np.ndarray:
    """The priority group a consumer's series carry: the pinned group, else its first group."""
    pinned = _label(frame["pin_group"]) if "pin_group" in frame else np.array([""] * len(frame))
    first = [g[0] if isinstance(g, (list, tuple, np.ndarray)) and len(g) else "" for g in
             (frame["priority_groups"] if "priority_groups" in frame else [None] * len(frame))]
    return np.where(pinned != "", pinned, np.array(first, dtype=object))


class CycleCollector(Collector):
    """A custom prometheus-client collector over the latest Snapshot."""

    def __init__(self, cardinality: str = "auto", all_up_to: int = ALL_UP_TO) -> None:
        if cardinality not in CARDINALITIES:
            raise JetwatchError(f"--metrics-cardinality must be one of {', '.join(CARDINALITIES)}, not {cardinality!r}")
        self.cardinality = cardinality
        self.all_up_to = all_up_to
        self.all_now = cardinality != "non_ok"  # every consumer's series in this render (decided per render)
        self.snapshot: Snapshot | None = None

    def _family(self, name: str, **kw: Any) -> Metric:
        m = BY_NAME[name]
        kind = {"gauge": GaugeMetricFamily, "counter": CounterMetricFamily, "info": InfoMetricFamily}[m.type]
        labels = [x for x in m.labels if not (m.type == "info" and x in INFO_VALUES)]
        return kind(m.name, m.help, labels=labels or None, **kw)

    def _series(self, name: str) -> GaugeMetricFamily | CounterMetricFamily:
        """A gauge or counter family that series are added to one by one."""
        family = self._family(name)
        if not isinstance(family, GaugeMetricFamily | CounterMetricFamily):
            raise TypeError(f"{name} is declared as a {BY_NAME[name].type}, not a gauge or a counter")
        return family

    def _info(self, name: str) -> InfoMetricFamily:
        family = self._family(name)
        if not isinstance(family, InfoMetricFamily):
            raise TypeError(f"{name} is declared as a {BY_NAME[name].type}, not an info")
        return family

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot
        if snap is None:
            return
        self.decide_all(len(snap.consumers))
        yield from self._consumer_families(snap)
        yield from self._fleet_families(snap)
        yield from self._collector_families(snap)

    def decide_all(self, consumers: int) -> bool:
        """Whether every consumer's series are exported in this render, for a fleet of this size. Under `auto`, a
        fleet that grew past --metrics-all-up-to gets them all again only below nine tenths of it:
        one that hovers at the limit (consumers made and deleted) would otherwise drop and restore
        every OK consumer's series cycle after cycle, leaving gaps in every graph."""
        if self.cardinality != "auto":
            return self.cardinality == "all"
        self.all_now = consumers <= (self.all_up_to if self.all_now else 0.9 * self.all_up_to)
        return self.all_now

    def _shown(self, frame: pd.DataFrame) -> pd.DataFrame:
        if frame.empty or self.all_now:
            return frame
        # Non-OK consumers, and those with a config finding (few: a finding is the exception).
        shown = (frame["verdict"] != "OK").to_numpy()
        if "config_findings" in frame:
            shown |= np.fromiter((bool(f) for f in frame["config_findings"]), dtype=bool, count=len(frame))
        return frame[shown]

    def _failover(self, snap: Snapshot) -> Iterator[Metric]:
        """Every pinned_client consumer shown, and every one without a standby whether shown or not:
        one worker is a legitimate design, so it is a finding, not a verdict, and a consumer that is
        OK would otherwise never show it."""
        f = snap.consumers
        fam = self._series("jetwatch_consumer_failover")
        if not f.empty:
            ready = failover.readiness_column(f, snap.holder_pulls)
            shown = set(self._shown(f).index)
            clusters = _label(f["cluster"]) if "cluster" in f else [""] * len(f)
            for at, cl, a, s, c, g, r in zip(f.index, clusters, _label(f["account"]), _label(f["stream"]),
                                            _label(f["consumer"]), _group(f), ready):
                if r is not None and (r != failover.STANDBY or at in shown):
                    fam.add_metric([cl, a, s, c, g, r], 1.0)
        yield fam

    def _dropped(self, snap: Snapshot) -> Iterator[Metric]:
        """Every consumer that dropped messages since the collector started, whether shown or not:
        a drop is lost work whatever the verdict (a +TERM leaves a consumer OK), and the alert on
        drops needs its series. Bounded by the drops themselves (and `keep_only`)."""
        f = snap.consumers
        fam = self._series("jetwatch_consumer_dropped_messages")
        if not f.empty and snap.drops.by_consumer:
            clusters = _label(f["cluster"]) if "cluster" in f else [""] * len(f)
            known = {(a, s, c): (cl, a, s, c, g) for cl, a, s, c, g in zip(
                clusters, _label(f["account"]), _label(f["stream"]), _label(f["consumer"]), _group(f))}
            for key, n in sorted(snap.drops.by_consumer.items()):
                if key[:3] in known:
                    fam.add_metric([*known[key[:3]], key[3]], n)
        yield fam

    def _consumer_families(self, snap: Snapshot) -> Iterator[Metric]:
        yield from self._failover(snap)
        yield from self._dropped(snap)
        f = self._shown(snap.consumers)
        if f.empty:
            return
        labels = list(zip(_label(f["cluster"]) if "cluster" in f else [""] * len(f), _label(f["account"]),
                          _label(f["stream"]), _label(f["consumer"]), _group(f)))
        now = snap.at.timestamp()

        def gauge(name: str, values: object, keep: object = None) -> Metric:
            fam = self._series(name)
            arr = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float)
            mask = ~np.isnan(arr) if keep is None else (~np.isnan(arr) & np.asarray(keep, dtype=bool))
            for lab, value, ok in zip(labels, arr, mask):
                if ok:
                    fam.add_metric(lab, float(value))
            return fam

        yield gauge("jetwatch_consumer_pending_messages", f["num_pending"])
        yield gauge("jetwatch_consumer_ack_pending_messages", f["num_ack_pending"])
        limit = pd.to_numeric(f["max_ack_pending"], errors="coerce").astype(float)  # no config yet: NaN
        yield gauge("jetwatch_consumer_ack_pending_limit_messages", limit, (limit > 0).to_numpy())
        yield gauge("jetwatch_consumer_waiting_requests", f["num_waiting"])
        wlimit = pd.to_numeric(f["max_waiting"], errors="coerce").astype(float)
        yield gauge("jetwatch_consumer_waiting_limit_requests", wlimit, (wlimit > 0).to_numpy())
        yield gauge("jetwatch_consumer_redelivered_messages", f["num_redelivered"])
        yield gauge("jetwatch_consumer_paused", f["paused"].astype(object).where(f["paused"].notna(), False)
                    .astype(bool).astype(int))
        for name, column in (("jetwatch_consumer_oldest_unacked_age_seconds", "oldest_unacked_age_seconds"),
                             ("jetwatch_consumer_oldest_undelivered_age_seconds", "oldest_undelivered_age_seconds"),
                             ("jetwatch_consumer_drain_eta_seconds", "eta_seconds"),
                             ("jetwatch_consumer_time_to_loss_seconds", "time_to_loss_seconds"),
                             ("jetwatch_consumer_stream_room_messages", "stream_room_messages")):
            if column in f:
                yield gauge(name, f[column])
        verdict, since = self._series("jetwatch_consumer_verdict"), self._series("jetwatch_consumer_verdict_since_timestamp_seconds")
        for lab, v, s in zip(labels, f["verdict"], pd.to_datetime(f["since"], utc=True)):
            verdict.add_metric([*lab, v], 1.0)
            if not pd.isna(s):
                since.add_metric([*lab, v], s.timestamp())
        yield verdict
        yield since
        config = self._series("jetwatch_consumer_config_finding")
        if "config_findings" in f:
            for lab, found in zip(labels, f["config_findings"]):
                for kind in sorted({str(x.get("kind")) for x in found or ()} & set(CONFIG_KINDS)):
                    config.add_metric([*lab, kind], 1.0)
        yield config
        silenced = self._series("jetwatch_consumer_silenced")
        until = self._series("jetwatch_consumer_silenced_until_timestamp_seconds")
        if "silenced" in f:
            for lab, held, v, t in zip(labels, f["silenced"], f["silenced_verdict"], f["silenced_until"]):
                if bool(held):
                    silenced.add_metric([*lab, str(v)], 1.0)
                    until.add_metric([*lab, str(v)], pd.Timestamp(t).timestamp())
        yield silenced
        yield until
        pinned_client = (f["priority_policy"] == "pinned_client").to_numpy()
        has_pin = pd.Series(_label(f["pinned_id"])) != ""
        yield gauge("jetwatch_consumer_pinned", has_pin.astype(int), pinned_client)
        ages = now - pd.to_datetime(f["pinned_ts"], utc=True).map(lambda t: t.timestamp() if not pd.isna(t) else np.nan)
        yield gauge("jetwatch_consumer_pin_age_seconds", ages.to_numpy(), has_pin.to_numpy())
        info = self._info("jetwatch_consumer_pin")
        for lab, pin in zip(labels, _label(f["pinned_id"])):
            if pin:
                held = snap.holders.get(holder_key(lab[1], lab[2], lab[3], pin))
                info.add_metric(lab, {"pinned_id": pin, "holder": holder_label(held),
                                      "pin_holder": pin_holder_label(pin, held)})
        yield info
        clusters = {(a, s, c, g): cl for cl, a, s, c, g in labels}
        switches = self._series("jetwatch_consumer_pin_switches")
        for key, n in sorted(snap.pins.switches.items()):
            if key in clusters:
                switches.add_metric([clusters[key], *key], n)
        yield switches
        unpins = self._series("jetwatch_consumer_unpins")
        for key, n in sorted(snap.pins.unpins.items()):
            if key[:4] in clusters:
                unpins.add_metric([clusters[key[:4]], *key], n)
        yield unpins
        moves = self._series("jetwatch_consumer_pin_moves")
        for key, n in sorted(snap.moves.by_consumer.items()):
            if key[:4] in clusters:
                moves.add_metric([clusters[key[:4]], *key], n)
        yield moves

    def _fleet_families(self, snap: Snapshot) -> Iterator[Metric]:
        counts = snap.consumers["verdict"].value_counts() if not snap.consumers.empty else pd.Series(dtype=int)
        fam = self._series("jetwatch_consumers")
        for v in VERDICT_NAMES:
            fam.add_metric([v], float(counts.get(v, 0)))
        yield fam
        yield self._family("jetwatch_pin_switches", value=snap.pins.fleet_switches)
        unpins = self._series("jetwatch_unpins")
        for reason, n in sorted(snap.pins.fleet_unpins.items()):
            unpins.add_metric([reason], n)
        yield unpins
        moves = self._series("jetwatch_pin_moves")
        for cause, n in sorted(snap.moves.fleet.items()):
            moves.add_metric([cause], n)
        yield moves
        groups = self._series("jetwatch_pinned_groups")
        ready = pd.Series(failover.readiness_column(snap.consumers, snap.holder_pulls)
                          if not snap.consumers.empty else [], dtype=object)
        for r in failover.READINESS:
            groups.add_metric([r], float((ready == r).sum()))
        yield groups
        dropped = self._series("jetwatch_dropped_messages")
        for reason, n in sorted(snap.drops.fleet.items()):
            dropped.add_metric([reason], n)
        yield dropped

    def _collector_families(self, snap: Snapshot) -> Iterator[Metric]:
        cumulative, running = [], 0
        for bound, n in zip((*DURATION_BUCKETS, float("inf")), snap.cycle_buckets):
            running += n
            cumulative.append(("+Inf" if bound == float("inf") else repr(bound), running))
        m = BY_NAME["jetwatch_collector_cycle_duration_seconds"]
        yield HistogramMetricFamily(m.name, m.help, buckets=cumulative, sum_value=snap.cycle_sum)
        yield self._family("jetwatch_collector_cycles", value=snap.cycles)
        # By cluster: each collector's freshness is its own cluster's, and a fleet's alert names which one went stale.
        fresh = self._series("jetwatch_collector_last_cycle_timestamp_seconds")
        fresh.add_metric([snap.cluster], snap.at.timestamp())
        yield fresh
        if snap.capture_backlog is not None:
            yield self._family("jetwatch_collector_capture_backlog_messages", value=snap.capture_backlog)
        yield self._family("jetwatch_collector_every_consumer_exported", value=int(self.all_now))
        yield self._family("jetwatch_collector_rejects", value=snap.rejects)
        yield self._family("jetwatch_collector_capture_gaps", value=snap.capture_gaps)
        if snap.last_capture_gap_at is not None:
            yield self._family("jetwatch_collector_last_capture_gap_timestamp_seconds",
                               value=snap.last_capture_gap_at.timestamp())
