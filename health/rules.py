"""The health model: one table of rules, most severe first (DESIGN.md, "Health model").

Each rule looks at a consumer's window features (health/features.py) and its limits, and either
stays silent or returns a finding: the reason in words and the numbers behind it. The verdict is
the most severe finding; every finding is listed. The dashboard and the Spark pipeline both call
`evaluate`, so they cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import pandas as pd

from health.features import KEY, Frame, window_features


@dataclass(frozen=True)
class Thresholds:
    window_seconds: float = 300.0
    min_samples: int = 3
    min_span_seconds: float = 60.0
    saturation_ratio: float = 0.9
    unpinned_after_seconds: float = 30.0
    flapping_switches: int = 4
    redelivery_share: float = 0.1

    @classmethod
    def from_settings(cls, s: Any) -> "Thresholds":
        return cls(s.health_window, s.health_min_samples, s.health_min_span, s.saturation_ratio,
                   s.unpinned_after, s.flapping_switches, s.redelivery_share)


@dataclass(frozen=True)
class Finding:
    verdict: str
    reason: str
    numbers: dict[str, float | int | str] = field(default_factory=dict)


Ctx = Mapping[str, Any]  # features + limits + counts of one consumer


def _n(x: Any) -> int:
    return int(round(float(x)))


def _limited(x: Any) -> bool:
    return x is not None and not pd.isna(x) and float(x) > 0


def no_pullers(c: Ctx, th: Thresholds) -> Finding | None:
    if c["pending_min"] > 0 and c["waiting_max"] == 0 and not c["delivered_moved"]:
        return Finding("NO_PULLERS", f"{_n(c['pending_last'])} messages pending and no client has "
                       f"pulled for {c['span_seconds']:.0f}s",
                       {"pending": _n(c["pending_last"]), "waiting": 0, "seconds": round(c["span_seconds"])})
    return None


def stalled(c: Ctx, th: Thresholds) -> Finding | None:
    if c["ack_pending_min"] > 0 and not c["ack_floor_moved"]:
        return Finding("STALLED", f"{_n(c['ack_pending_last'])} messages handed out and none acknowledged "
                       f"for {c['span_seconds']:.0f}s", {"ack_pending": _n(c["ack_pending_last"]),
                                                        "seconds": round(c["span_seconds"])})
    return None


def saturated(c: Ctx, th: Thresholds) -> Finding | None:
    parts, numbers = [], {}
    if _limited(c.get("max_ack_pending")) and c["ack_pending_recent_min"] >= th.saturation_ratio * c["max_ack_pending"]:
        parts.append(f"{_n(c['ack_pending_last'])} of max_ack_pending {_n(c['max_ack_pending'])} in flight")
        numbers.update(ack_pending=_n(c["ack_pending_last"]), max_ack_pending=_n(c["max_ack_pending"]))
    if c.get("is_pull", True) and _limited(c.get("max_waiting")) and \
            c["waiting_recent_min"] >= th.saturation_ratio * c["max_waiting"]:
        parts.append(f"{_n(c['waiting_last'])} of max_waiting {_n(c['max_waiting'])} pull requests waiting "
                     "(further pulls get 409 Exceeded MaxWaiting)")
        numbers.update(waiting=_n(c["waiting_last"]), max_waiting=_n(c["max_waiting"]))
    return Finding("SATURATED", "; ".join(parts), numbers) if parts else None


def unpinned(c: Ctx, th: Thresholds) -> Finding | None:
    if c.get("priority_policy") == "pinned_client" and c["pending_last"] > 0 \
            and c["nopin_seconds"] > th.unpinned_after_seconds:
        return Finding("UNPINNED", f"no pinned client for {c['nopin_seconds']:.0f}s with "
                       f"{_n(c['pending_last'])} messages pending",
                       {"seconds": round(c["nopin_seconds"]), "pending": _n(c["pending_last"])})
    return None


def flapping(c: Ctx, th: Thresholds) -> Finding | None:
    switches = max(int(c.get("pin_switches") or 0), int(c["sample_pin_switches"]))
    if switches > th.flapping_switches:
        return Finding("FLAPPING", f"{switches} pin switches in {th.window_seconds / 60:.0f} minutes",
                       {"switches": switches, "limit": th.flapping_switches})
    return None


def redelivering(c: Ctx, th: Thresholds) -> Finding | None:
    deliveries = c["deliveries"]
    # Δ consumer_seq − Δ stream_seq counts redeliveries only when every stream message is the
    # consumer's: on a filtered consumer the stream sequence jumps over other subjects.
    redelivered = 0.0 if c.get("filtered") else max(0.0, deliveries - c["stream_delivered"])
    redelivered += float(c.get("nak_count") or 0) + float(c.get("max_deliveries_count") or 0)
    share = redelivered / deliveries if deliveries > 0 else 0.0
    if deliveries > 0 and share > th.redelivery_share:
        return Finding("REDELIVERING", f"{share:.0%} of {_n(deliveries)} deliveries were redeliveries",
                       {"redeliveries": _n(redelivered), "deliveries": _n(deliveries), "share": round(share, 3)})
    if c["redelivered_last"] > c["redelivered_first"] and c["redelivered_never_falls"]:
        return Finding("REDELIVERING", f"messages awaiting redelivery rose from {_n(c['redelivered_first'])} "
                       f"to {_n(c['redelivered_last'])}",
                       {"redelivered_first": _n(c["redelivered_first"]), "redelivered_last": _n(c["redelivered_last"])})
    return None


def lagging(c: Ctx, th: Thresholds) -> Finding | None:
    if c["pending_slope"] > 0 and c["pending_last"] > c["pending_first"] \
            and c["pending_rising_share"] >= 0.6 and c["ack_floor_moved"]:
        return Finding("LAGGING", f"backlog grew from {_n(c['pending_first'])} to {_n(c['pending_last'])} "
                       f"({c['pending_slope']:.1f}/s) while acks kept coming",
                       {"pending_first": _n(c["pending_first"]), "pending_last": _n(c["pending_last"]),
                        "per_second": round(float(c["pending_slope"]), 2)})
    return None


def paused(c: Ctx, th: Thresholds) -> Finding | None:
    if c["paused_last"]:
        return Finding("PAUSED", "the consumer is paused: no deliveries until it resumes", {})
    return None


@dataclass(frozen=True)
class Rule:
    verdict: str
    check: Callable[[Ctx, Thresholds], Finding | None]
    pull_only: bool = False
    suppressed_by_pause: bool = False


# Severity order: the first rule that fires gives the verdict.
RULES: tuple[Rule, ...] = (
    Rule("NO_PULLERS", no_pullers, pull_only=True, suppressed_by_pause=True),
    Rule("STALLED", stalled),
    Rule("SATURATED", saturated),
    Rule("UNPINNED", unpinned, pull_only=True),
    Rule("FLAPPING", flapping, pull_only=True),
    Rule("REDELIVERING", redelivering),
    Rule("LAGGING", lagging, suppressed_by_pause=True),
    Rule("PAUSED", paused),
)
VERDICTS = tuple(r.verdict for r in RULES) + ("OK", "COLLECTING")
SEVERITY = {v: i for i, v in enumerate(VERDICTS)}


def judge(c: Ctx, th: Thresholds) -> list[Finding]:
    """All findings for one consumer, most severe first; COLLECTING or OK when none apply."""
    if c["samples"] < th.min_samples or c["span_seconds"] < th.min_span_seconds:
        return [Finding("COLLECTING", f"{_n(c['samples'])} samples over {c['span_seconds']:.0f}s; a verdict "
                        f"needs {th.min_samples} over {th.min_span_seconds:.0f}s",
                        {"samples": _n(c["samples"]), "seconds": round(c["span_seconds"])})]
    is_pull = c.get("is_pull")
    is_pull = True if is_pull is None or pd.isna(is_pull) else bool(is_pull)
    findings = []
    for rule in RULES:
        if rule.pull_only and not is_pull:
            continue
        if rule.suppressed_by_pause and c["paused_last"]:
            continue
        found = rule.check(c, th)
        if found:
            findings.append(found)
    return findings or [Finding("OK", "healthy", {})]


LIMIT_COLUMNS = ["is_pull", "filtered", "max_ack_pending", "max_waiting", "priority_policy"]
COUNT_COLUMNS = ["pin_switches", "nak_count", "max_deliveries_count"]
VERDICT_COLUMNS = KEY + ["verdict", "reason", "findings", "samples", "last_ts", "delivered_per_second",
                         "acked_per_second", "redelivered_per_second"]


def evaluate(samples: Frame, limits: pd.DataFrame | None, thresholds: Thresholds,
             counts: pd.DataFrame | None = None) -> pd.DataFrame:
    """Verdicts for every consumer in `samples` (one window): the one entry point for both
    the dashboard and the pipeline. `limits` has KEY + LIMIT_COLUMNS; `counts` has KEY +
    some of COUNT_COLUMNS (events in the window)."""
    feats = window_features(samples)
    if feats.empty:
        return pd.DataFrame(columns=VERDICT_COLUMNS)
    if limits is not None and not limits.empty:
        feats = feats.merge(limits[KEY + [c for c in LIMIT_COLUMNS if c in limits]], on=KEY, how="left")
    if counts is not None and not counts.empty:
        feats = feats.merge(counts, on=KEY, how="left")
        present = [c for c in COUNT_COLUMNS if c in feats]
        feats[present] = feats[present].fillna(0)  # no events in the window for that consumer
    out = []
    for c in feats.to_dict("records"):
        findings = judge(c, thresholds)
        span = c["span_seconds"] or float("nan")
        redelivered = float("nan") if c.get("filtered") is True else max(0.0, c["deliveries"] - c["stream_delivered"])
        out.append({
            "account": c["account"], "stream": c["stream"], "consumer": c["consumer"],
            "verdict": findings[0].verdict, "reason": findings[0].reason,
            "findings": [{"verdict": f.verdict, "reason": f.reason, "numbers": f.numbers} for f in findings],
            "samples": int(c["samples"]), "last_ts": c["last_ts"],
            "delivered_per_second": c["deliveries"] / span, "acked_per_second": c["acked"] / span,
            "redelivered_per_second": redelivered / span,
        })
    return pd.DataFrame(out, columns=VERDICT_COLUMNS)
