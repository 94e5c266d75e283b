"""The verdicts as people and alerting systems see them: name, badge colour, level and meaning,
worst first. A fact of its own, read by the rules that name them (health/rules.py), and by what
only needs the table (`jetwatch check`, which must answer without loading the rules' numerics).

Cluster verdicts first: a worker is not STALLED when its consumer has no leader. Then the rules'
verdicts in the order the rules fire (causes before symptoms), then OK and COLLECTING.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    """A verdict as people see it. `colour` is a Streamlit badge colour; `level` is what an
    alerting system makes of it (critical, warning, info, ok, unknown)."""

    name: str
    colour: str
    level: str
    meaning: str


VERDICTS: tuple[Verdict, ...] = (
    Verdict("NO_LEADER", "red", "critical",
            "no server leads the consumer (its leader's server is gone, or its replicas lost their quorum): "
            "nothing is delivered or acknowledged"),
    Verdict("API_UNAVAILABLE", "red", "critical",
            "the cluster's JetStream API does not answer (its meta group has no leader): the consumer's state is "
            "unknown and shown as last known"),
    Verdict("OFFLINE", "red", "critical",
            "a running server holds the consumer (or its stream) but cannot load it, and says why (ADR-44: a "
            "feature or API level it does not support, as after a downgrade): nothing is delivered or acknowledged"),
    Verdict("STALLED", "red", "critical",
            "work is handed out and none is acknowledged"),
    Verdict("NO_PULLERS", "red", "critical",
            "work is pending, nothing is in flight and no client pulls"),
    Verdict("PIN_IDLE", "red", "critical",
            "the pinned client stopped pulling while work waits and another client's pull waits"),
    Verdict("SATURATED", "red", "critical",
            "in-flight work or waiting pulls at their limit"),
    Verdict("STREAM_FULL", "red", "critical",
            "the stream is full under its max_msgs or max_bytes with discard new: every publish is refused, so no "
            "new work arrives"),
    Verdict("LOSING", "red", "critical",
            "the stream's limits will remove messages the consumer has not processed within --loss-within"),
    Verdict("UNPINNED", "orange", "warning",
            "a pinned_client group has work and nobody pinned"),
    Verdict("FLAPPING", "orange", "warning",
            "the pin keeps moving between clients"),
    Verdict("REDELIVERING", "orange", "warning",
            "a large share of deliveries are redeliveries"),
    Verdict("LAGGING", "yellow", "warning",
            "the oldest unacknowledged message keeps getting older (or is older than --lagging-age)"),
    Verdict("PAUSED", "blue", "info",
            "paused: no deliveries until it resumes"),
    Verdict("OK", "green", "ok",
            "healthy"),
    Verdict("COLLECTING", "gray", "unknown",
            "too few samples in the window for a verdict yet"),
)
CLUSTER_VERDICTS: tuple[Verdict, ...] = VERDICTS[:3]  # judged from the cluster's evidence (health/cluster.py)
VERDICT_NAMES: tuple[str, ...] = tuple(v.name for v in VERDICTS)
BY_NAME: dict[str, Verdict] = {v.name: v for v in VERDICTS}
SEVERITY: dict[str, int] = {v.name: i for i, v in enumerate(VERDICTS)}
