"""Consumer state: turn the server's consumer info JSON into sample and config rows.

Shared by both ways of reading state (CONSUMER.LIST paging and /jsz), so a field means the same
whichever way it came.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

ZERO_TIME = "0001-01-01T00:00:00Z"

SAMPLE_COLUMNS = (
    "ts", "server", "cluster", "domain", "account", "stream", "consumer", "created",
    "num_pending", "num_ack_pending", "num_waiting", "num_redelivered",
    "delivered_consumer_seq", "delivered_stream_seq", "delivered_last_active",
    "ack_floor_consumer_seq", "ack_floor_stream_seq", "ack_floor_last_active",
    "paused", "pause_until", "pin_group", "pinned_id", "pinned_ts", "leader",
)


class MalformedState(ValueError):
    """A consumer entry lacks what every server sends (stream_name, name, config)."""


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

    @property
    def consumers(self) -> int:
        return len(self.samples["consumer"])


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
    """Append one consumer's sample, and its config if it changed since `known_hashes`."""
    try:
        stream, name, config = info["stream_name"], info["name"], info["config"]
    except (KeyError, TypeError):
        raise MalformedState("consumer entry without stream_name, name or config") from None
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
        group, pinned_id, pinned_ts, cluster.get("leader"),
    )
    for column, value in zip(SAMPLE_COLUMNS, row):
        batch.samples[column].append(value)

    key = (scope.account, stream, name)
    digest = config_hash(config) + (created or "")
    if known_hashes.get(key) == digest:
        return
    known_hashes[key] = digest
    filters = config.get("filter_subjects") or ([config["filter_subject"]] if config.get("filter_subject") else [])
    batch.configs.append({
        "ts": info.get("ts") or now_iso, "account": scope.account, "stream": stream, "consumer": name,
        "created": created, "config_hash": digest,
        "is_pull": not config.get("deliver_subject"), "filtered": bool(filters),
        "ack_policy": config.get("ack_policy"), "max_waiting": config.get("max_waiting"),
        "max_ack_pending": config.get("max_ack_pending"), "ack_wait_ns": config.get("ack_wait"),
        "max_deliver": config.get("max_deliver"), "priority_policy": config.get("priority_policy"),
        "priority_groups": list(config.get("priority_groups") or []),
        "priority_timeout_ns": config.get("priority_timeout"), "config_json": json.dumps(config),
    })
