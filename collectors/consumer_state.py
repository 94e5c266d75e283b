"""Consumer state: turn the server's consumer info JSON into sample and config rows.

Shared by both ways of reading state (CONSUMER.LIST paging and /jsz), so a field means the same
whichever way it came.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from jetwatch.core.clock import parse_rfc3339
from jetwatch.health import thresholds
from jetwatch.health.cluster import NO_LEADER, Evidence, EvidenceKey, replicas_at_risk, without_quorum

log = logging.getLogger("jetwatch.collector")

ZERO_TIME = "0001-01-01T00:00:00Z"

SAMPLE_COLUMNS = (
    "ts", "server", "cluster", "domain", "account", "stream", "consumer", "created",
    "num_pending", "num_ack_pending", "num_waiting", "num_redelivered",
    "delivered_consumer_seq", "delivered_stream_seq", "delivered_last_active",
    "ack_floor_consumer_seq", "ack_floor_stream_seq", "ack_floor_last_active",
    "paused", "pause_until", "pin_group", "pinned_id", "pinned_ts", "leader",
    # Filled by collectors/lag.py where it runs (NULL otherwise): seconds, and 'exact' or 'estimate'.
    "oldest_unacked_age_seconds", "oldest_unacked_age_kind",
    "oldest_undelivered_age_seconds", "oldest_undelivered_age_kind",
    # Seconds until the stream's limits remove the oldest unacknowledged message (health/loss.py).
    "time_to_loss_seconds", "loss_limit",
    # Messages the stream still takes before discard new refuses publishes (health/loss.py).
    "stream_room_messages",
)
LAG_COLUMNS = SAMPLE_COLUMNS[-7:]


class MalformedState(ValueError):
    """A consumer entry lacks what every server sends, or has a field of the wrong type: it
    goes to `rejects` alone and the rest of the cycle is stored."""


_COUNTS = ("num_pending", "num_ack_pending", "num_waiting", "num_redelivered")
_CONFIG_INTS = ("max_waiting", "max_ack_pending", "ack_wait", "max_deliver", "priority_timeout")


def _object(info: dict[str, Any], key: str) -> dict[str, Any]:
    value = info.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MalformedState(f"{key} is {type(value).__name__}, expected an object")
    return value


def _check_int(where: str, value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or not -(1 << 63) <= value < 1 << 63):
        raise MalformedState(f"{where} is {type(value).__name__} {value!r:.40}, expected an integer")


def _check_time(where: str, value: object) -> None:
    if value is None:
        return
    try:
        parse_rfc3339(value)
    except ValueError as exc:
        raise MalformedState(f"{where}: {exc}") from None


def _check_str(where: str, value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise MalformedState(f"{where} is {type(value).__name__} {value!r:.40}, expected a string")


def validate(info: object) -> None:
    """Every field jetwatch stores, checked for its type one by one (the store would otherwise
    refuse the cycle's whole batch over one bad value). Raises MalformedState saying which."""
    if not isinstance(info, dict):
        raise MalformedState(f"consumer entry is {type(info).__name__}, expected an object")
    for key in ("stream_name", "name"):
        if not isinstance(info.get(key), str) or not info[key]:
            raise MalformedState(f"consumer entry without a {key} string")
    if not isinstance(info.get("config"), dict):
        raise MalformedState("consumer entry without a config object")
    config = info["config"]
    for key in _COUNTS:
        _check_int(key, info.get(key))
    for part in ("delivered", "ack_floor"):
        seqs = _object(info, part)
        for key in ("consumer_seq", "stream_seq"):
            _check_int(f"{part}.{key}", seqs.get(key))
        _check_time(f"{part}.last_active", seqs.get("last_active"))
    cluster = _object(info, "cluster")
    _check_str("cluster.name", cluster.get("name"))
    _check_str("cluster.leader", cluster.get("leader"))
    _check_time("ts", info.get("ts"))
    _check_time("created", info.get("created"))
    if info.get("paused"):
        _check_time("config.pause_until", config.get("pause_until"))
    check_config(config)
    groups = info.get("priority_groups")
    if groups is not None:
        if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
            raise MalformedState(f"priority_groups is {groups!r:.60}, expected a list of objects")
        if groups:
            _check_str("priority_groups[0].group", groups[0].get("group"))
            _check_str("priority_groups[0].pinned_client_id", groups[0].get("pinned_client_id"))
            _check_time("priority_groups[0].pinned_ts", groups[0].get("pinned_ts"))


def check_config(config: dict[str, Any]) -> None:
    """The config fields jetwatch stores, checked for their type (the part of `validate` that
    depends on the config alone)."""
    for key in _CONFIG_INTS:
        _check_int(f"config.{key}", config.get(key))
    for key in ("priority_policy", "ack_policy", "deliver_subject", "filter_subject"):
        _check_str(f"config.{key}", config.get(key))
    for key in ("priority_groups", "filter_subjects"):
        value = config.get(key)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            raise MalformedState(f"config.{key} is {value!r:.60}, expected a list of strings")
    metadata = config.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):  # config_hash reads its keys
        raise MalformedState(f"config.metadata is {metadata!r:.60}, expected an object")


@dataclass
class Scope:
    """Where a reading came from: the same for every consumer of one request."""

    account: str
    server: str | None = None
    domain: str | None = None


@dataclass
class SampleBatch:
    """One cycle's readings, column-wise so they go into the store as one Arrow table."""

    samples: dict[str, list[Any]] = field(default_factory=lambda: {c: [] for c in SAMPLE_COLUMNS})
    configs: list[dict[str, Any]] = field(default_factory=list)
    rejects: list[tuple[str, str, str]] = field(default_factory=list)  # (subject, error, raw)
    streams: int = 0
    accounts: set[str] = field(default_factory=set)
    # Streams whose listing failed this cycle, and consumers whose entry was rejected: they keep
    # their last known state instead of vanishing.
    failed_streams: list[tuple[str, str]] = field(default_factory=list)  # (account, stream)
    rejected_consumers: list[tuple[str, str, str]] = field(default_factory=list)  # (account, stream, consumer)
    unanswered: list[tuple[str, str, str]] = field(default_factory=list)  # led by a server that did not answer
    # What showed that the cluster cannot serve a consumer, a stream's or an account's (health/cluster.py);
    # each consumer named keeps its last known state too.
    evidence: dict[EvidenceKey, Evidence] = field(default_factory=dict)
    # Consumers whose leader serves with some replicas not current: a finding each (health/cluster.py).
    cluster_findings: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)

    def reject(self, subject: str, error: MalformedState, info: object, account: str, stream: str) -> None:
        """Set one malformed entry aside with the reason; its consumer keeps its last state."""
        self.rejects.append((subject, str(error), json.dumps(info, default=str)[:10000]))
        name = info.get("name") if isinstance(info, dict) else None
        if isinstance(name, str):
            self.rejected_consumers.append((account, stream, name))
    errors: list[str] = field(default_factory=list)  # what failed, in words
    # Each sampled consumer's filter subjects, in sample order (empty: the whole stream), for lag.
    filters: list[tuple[str, ...]] = field(default_factory=list)
    server_now: dt.datetime | None = None  # the server's clock at its latest reply (for the offset)
    # The samples as read straight into Arrow (collectors/list_pages.py; times as the server's text),
    # when the whole cycle was read that way: what the store appends. The lag columns are not among them.
    arrow: dict[str, Any] | None = None

    def saw_server_time(self, text: object) -> None:
        """Keep the latest server time seen in a reply (`ts` of consumer info, JSZ `now`)."""
        try:
            at = parse_rfc3339(text)
        except ValueError:
            return
        if self.server_now is None or at > self.server_now:
            self.server_now = at

    @property
    def consumers(self) -> int:
        return len(self.samples["consumer"])


def note_quorum(batch: SampleBatch, key: tuple[str, str, str], replicas: object) -> None:
    """Evidence that a consumer's leader has no quorum, or a finding that it keeps one with some
    replicas not current, read from its own report of its replicas."""
    lost = without_quorum(replicas)
    if lost is not None:
        batch.evidence.setdefault(key, Evidence(NO_LEADER, lost[0], held_s=lost[1]))
    elif (at_risk := replicas_at_risk(replicas)) is not None:
        batch.cluster_findings[key] = at_risk


def config_hash(config: dict[str, Any]) -> str:
    """A digest of the settings that matter; server-stamped metadata (`_nats.*`) is left out,
    since the server writes it differently in create and list replies."""
    meta = {k: v for k, v in (config.get("metadata") or {}).items() if not k.startswith("_nats.")}
    clean = {**config, "metadata": meta}
    return hashlib.sha1(json.dumps(clean, sort_keys=True).encode()).hexdigest()


def _pin(info: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    groups = info.get("priority_groups") or []
    if not groups:
        return None, None, None
    first = groups[0]  # the server keeps one pin per consumer, reported under its first group
    pinned_id = first.get("pinned_client_id") or None
    pinned_ts = first.get("pinned_ts") if pinned_id and first.get("pinned_ts") != ZERO_TIME else None
    return first.get("group"), pinned_id, pinned_ts


def add_consumer(batch: SampleBatch, info: dict[str, Any], scope: Scope, now_iso: str,
                 known_hashes: dict[tuple[str, str, str], str]) -> None:
    """Append one consumer's sample, and its config if it changed since `known_hashes`;
    raises MalformedState (and appends nothing) for an entry with a field of the wrong type."""
    validate(info)
    stream, name, config = info["stream_name"], info["name"], info["config"]
    delivered = info.get("delivered") or {}
    ack_floor = info.get("ack_floor") or {}
    cluster = info.get("cluster") or {}
    group, pinned_id, pinned_ts = _pin(info)
    created = info.get("created")
    row = (
        info.get("ts") or now_iso, cluster.get("leader") or scope.server, cluster.get("name"),
        scope.domain, scope.account, stream, name, created,
        info.get("num_pending"), info.get("num_ack_pending"), info.get("num_waiting"),
        info.get("num_redelivered"),
        delivered.get("consumer_seq"), delivered.get("stream_seq"), delivered.get("last_active"),
        ack_floor.get("consumer_seq"), ack_floor.get("stream_seq"), ack_floor.get("last_active"),
        bool(info.get("paused", False)), config.get("pause_until") if info.get("paused") else None,
        group, pinned_id, pinned_ts, cluster.get("leader"), *([None] * len(LAG_COLUMNS)),
    )
    for column, value in zip(SAMPLE_COLUMNS, row):
        batch.samples[column].append(value)
    filters = filter_subjects(config)
    batch.filters.append(filters)

    key = (scope.account, stream, name)
    note_quorum(batch, key, cluster.get("replicas") if isinstance(cluster, dict) else None)
    digest = config_hash(config) + (created or "")
    if known_hashes.get(key) == digest:
        return
    known_hashes[key] = digest
    batch.configs.append(config_row(info, config, scope, now_iso, digest, filters))


def filter_subjects(config: dict[str, Any]) -> tuple[str, ...]:
    """The consumer's filter subjects (empty: the whole stream)."""
    return tuple(config.get("filter_subjects") or ([config["filter_subject"]] if config.get("filter_subject") else []))


def config_row(info: dict[str, Any], config: dict[str, Any], scope: Scope, now_iso: str, digest: str,
               filters: tuple[str, ...]) -> dict[str, Any]:
    """One consumer_configs row: the config of a consumer whose hash changed, with the thresholds
    its metadata sets (`threshold_<name>`, None where it sets none: kept in memory for judging,
    not stored apart from the config). A value that cannot be read is logged, once per change."""
    own = thresholds.from_metadata(config.get("metadata"))
    for problem in own.problems:
        log.warning("consumer %s > %s (account %s): metadata threshold %s", info["stream_name"], info["name"],
                    scope.account, problem)
    return {**{thresholds.INPUT + name: own.values.get(name) for name in thresholds.OVERRIDABLE},
        "ts": info.get("ts") or now_iso, "account": scope.account, "stream": info["stream_name"],
        "consumer": info["name"], "created": info.get("created"), "config_hash": digest,
        "is_pull": not config.get("deliver_subject"), "filtered": bool(filters),
        "ack_policy": config.get("ack_policy"), "max_waiting": config.get("max_waiting"),
        "max_ack_pending": config.get("max_ack_pending"), "ack_wait_ns": config.get("ack_wait"),
        "max_deliver": config.get("max_deliver"), "priority_policy": config.get("priority_policy"),
        "priority_groups": list(config.get("priority_groups") or []),
        "priority_timeout_ns": config.get("priority_timeout"), "config_json": json.dumps(config),
    }
