"""Consumer state, a whole page at a time: the fast path of consumer_state.add_consumer.

One pass pulls each entry's fields into a tuple; the checks then run column-wise (the types of a
column as one set, its integer range as one min and max, its times as one regular expression over
the joined column) instead of field by field. A consumer's config is checked, hashed and turned
into a config row only when its bytes differ from the previous cycle's. The checks here are
stricter than consumer_state.validate: whatever they do not vouch for, the caller hands to the
per-entry path, which rejects the malformed entry alone with its reason, exactly as before.
"""

from __future__ import annotations

import marshal
import re
from typing import Any

from jetwatch.collectors.consumer_state import (
    LAG_COLUMNS,
    SAMPLE_COLUMNS,
    ZERO_TIME,
    MalformedState,
    SampleBatch,
    Scope,
    check_config,
    config_hash,
    config_row,
    filter_subjects,
    note_quorum,
)

# Per consumer (account, stream, name): its config's exact bytes and `created` as last seen, with
# what they gave (the config hash stored in consumer_configs, the filter subjects).
Fingerprints = dict[tuple[str, str, str], tuple[bytes, Any, str, tuple[str, ...]]]

# A subset of what core.clock.parse_rfc3339 accepts: Go's RFC 3339 with a 'T', 0-9 fraction digits
# and Z or ±HH:MM, each part in range; a day is only taken when every year has it in that month
# (29 February and anything odder go to the per-entry check).
TIME_PATTERN = (r"(?!0000)\d{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)"
         r"|(?:0[13578]|1[02])-31)T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,9})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)")
_TIME_LINE = re.compile(f"^{TIME_PATTERN}$", re.MULTILINE | re.ASCII)
_INT64 = (-(1 << 63), 1 << 63)
_NONE = type(None)
_EMPTY: dict[str, Any] = {}


def _times_ok(values: tuple[Any, ...]) -> bool:
    present = [v for v in values if v is not None]
    if not present:
        return True
    if set(map(type, present)) != {str}:
        return False
    joined = "\n".join(present)
    return joined.count("\n") == len(present) - 1 and len(_TIME_LINE.findall(joined)) == len(present)


def _ints_ok(values: tuple[Any, ...]) -> bool:
    types = set(map(type, values))
    if not types - {_NONE}:
        return True
    if types - {_NONE} != {int}:  # bool is its own type: refused, as validate does
        return False
    present = [v for v in values if v is not None] if _NONE in types else values
    return _INT64[0] <= min(present) and max(present) < _INT64[1]


def _strs_ok(values: tuple[Any, ...]) -> bool:
    return set(map(type, values)) <= {str, _NONE}


def add_consumers(batch: SampleBatch, infos: list[Any], scope: Scope, now_iso: str,
                  known_hashes: dict[tuple[str, str, str], str], previous: Fingerprints, current: Fingerprints) -> bool:
    """Append every entry of one page as add_consumer would, and return True; or append nothing
    and return False when any entry is not plainly well formed (the caller then takes the
    entries one by one). `previous` is the last cycle's fingerprints; `current` gets this one's."""
    rows, keys, prints = [], [], []  # per entry: its sample fields, key and config fingerprint
    account = scope.account
    try:
        for info in infos:
            config = info["config"]
            if type(config) is not dict:
                return False
            delivered = info.get("delivered")
            delivered = _EMPTY if delivered is None else delivered
            ack_floor = info.get("ack_floor")
            ack_floor = _EMPTY if ack_floor is None else ack_floor
            cluster = info.get("cluster")
            cluster = _EMPTY if cluster is None else cluster
            groups = info.get("priority_groups")
            if groups:
                if type(groups) is not list or any(type(g) is not dict for g in groups):
                    return False
                first = groups[0]
                group, pinned_id, pinned_ts = first.get("group"), first.get("pinned_client_id"), first.get("pinned_ts")
            elif groups is None or groups == []:
                group = pinned_id = pinned_ts = None
            else:
                return False
            paused = info.get("paused", False)
            stream, name, created = info.get("stream_name"), info.get("name"), info.get("created")
            rows.append((
                info.get("ts"), cluster.get("leader"), cluster.get("name"), stream, name, created,
                info.get("num_pending"), info.get("num_ack_pending"), info.get("num_waiting"),
                info.get("num_redelivered"),
                delivered.get("consumer_seq"), delivered.get("stream_seq"), delivered.get("last_active"),
                ack_floor.get("consumer_seq"), ack_floor.get("stream_seq"), ack_floor.get("last_active"),
                paused, config.get("pause_until") if paused else None, group, pinned_id, pinned_ts,
            ))
            key = (account, stream, name)
            keys.append(key)
            exact = marshal.dumps(config, 2)  # exact: types, values and order (version 2: no back-references)
            seen = previous.get(key)
            if seen is None or seen[0] != exact or seen[1] != created:
                check_config(config)
                seen = (exact, created, config_hash(config) + (created or ""), filter_subjects(config))
            current[key] = seen
            prints.append(seen)
    except (AttributeError, KeyError, TypeError, ValueError, MalformedState):
        return False  # not a dict where one belongs, an unhashable name, a bad config: one by one
    if not rows:
        return True
    (ts, leader, cluster_name, streams, names, created, n_pending, n_ack, n_wait, n_redel, d_cseq, d_sseq, d_active,
     a_cseq, a_sseq, a_active, paused, pause_until, group, pinned_id, pinned_ts) = zip(*rows)
    if not (set(map(type, streams)) == {str} and all(streams) and set(map(type, names)) == {str} and all(names)
            and all(map(_ints_ok, (n_pending, n_ack, n_wait, n_redel, d_cseq, d_sseq, a_cseq, a_sseq)))
            and all(map(_strs_ok, (leader, cluster_name, group, pinned_id)))
            and all(map(_times_ok, (ts, created, d_active, a_active, pause_until, pinned_ts)))):
        return False
    n = len(rows)
    pin_ids = [p or None for p in pinned_id]
    sample = (
        [t or now_iso for t in ts], [s or scope.server for s in leader], cluster_name, [scope.domain] * n,
        [scope.account] * n, streams, names, created, n_pending, n_ack, n_wait, n_redel,
        d_cseq, d_sseq, d_active, a_cseq, a_sseq, a_active, list(map(bool, paused)), pause_until, group,
        pin_ids, [t if p and t != ZERO_TIME else None for p, t in zip(pin_ids, pinned_ts)], leader,
        *([None] * n for _ in range(len(LAG_COLUMNS))),
    )
    for column, values in zip(SAMPLE_COLUMNS, sample):
        batch.samples[column].extend(values)
    batch.filters.extend([p[3] for p in prints])
    for info, key, (_, _, digest, filters) in zip(infos, keys, prints):
        cluster = info.get("cluster")
        if type(cluster) is dict and cluster.get("replicas"):
            note_quorum(batch, key, cluster["replicas"])
        if known_hashes.get(key) != digest:
            known_hashes[key] = digest
            batch.configs.append(config_row(info, info["config"], scope, now_iso, digest, filters))
    return True
