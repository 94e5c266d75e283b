"""CONSUMER.LIST pages read straight into Arrow: the collector's way of reading a cycle.

Decoding the pages into Python objects (json.loads), pulling the sample fields out of them
(state_columns) and converting those values back into Arrow for the store handles every value in
the interpreter, one at a time. Here pyarrow's JSON reader (C++, on every core) reads
the sample fields into typed columns, and msgspec cuts out each consumer's config as the bytes the
server sent: a config is decoded only when its bytes change. The store appends the columns as they
are; the Python lists the health window and the lag reader take are made from them.

What is read this way is what decoding the pages and taking them a page at a time would give, or
nothing: pages that are not valid UTF-8 are refused (pyarrow does not check), pyarrow refuses a
field of another JSON type than the one declared (a count sent as a string or a boolean, a number
past int64, a fraction, a key given twice), entries that are not objects are refused, and the times
are held to the page path's pattern. Anything not vouched for returns None, and the caller decodes
the pages and takes the page-at-a-time path, which rejects a malformed entry alone. One difference
is left on purpose: a field jetwatch does not store is not read here, so a page that json.loads
refuses only for such a field (an integer of more than 4,300 digits, nesting ~1,000 deep) is
stored here where decoding would fail the stream (or, for a /jsz report, leave that server out).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from jetwatch.collectors.consumer_state import (
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
from jetwatch.collectors.filters import NameFilter
from jetwatch.collectors.state_columns import TIME_PATTERN

# Per consumer (account, stream, name): its config's bytes and `created` as last read this way,
# with what they gave (the config hash stored in consumer_configs, the filter subjects).
RawFingerprints = dict[tuple[str, str, str], tuple[bytes, Any, str, tuple[str, ...]]]

_SEQ = pa.struct([("consumer_seq", pa.int64()), ("stream_seq", pa.int64()), ("last_active", pa.string())])
_REPLICA = pa.struct([("name", pa.string()), ("current", pa.bool_()), ("offline", pa.bool_()),
                      ("active", pa.int64())])
_GROUP = pa.struct([("group", pa.string()), ("pinned_client_id", pa.string()), ("pinned_ts", pa.string())])
_INFO = pa.struct([
    ("stream_name", pa.string()), ("name", pa.string()), ("created", pa.string()), ("ts", pa.string()),
    ("num_pending", pa.int64()), ("num_ack_pending", pa.int64()), ("num_waiting", pa.int64()),
    ("num_redelivered", pa.int64()), ("delivered", _SEQ), ("ack_floor", _SEQ), ("paused", pa.bool_()),
    ("cluster", pa.struct([("name", pa.string()), ("leader", pa.string()), ("replicas", pa.list_(_REPLICA))])),
    ("config", pa.struct([("pause_until", pa.string())])), ("priority_groups", pa.list_(_GROUP)),
])
# Objects may span lines: /jsz is pretty-printed (a raw newline inside a string is still refused).
_PARSE = pj.ParseOptions(explicit_schema=pa.schema([("consumers", pa.list_(_INFO))]),
                         unexpected_field_behavior="ignore", newlines_in_values=True)

def _for_re2(pattern: str) -> str:
    """The page path's time pattern for RE2, which has no lookahead: "not year 0000" spelled out."""
    spelled = pattern.replace(r"(?!0000)\d{4}", r"(?:[1-9]\d{3}|0[1-9]\d{2}|00[1-9]\d|000[1-9])")
    if "(?" in spelled.replace("(?:", ""):
        raise ValueError(f"the time pattern has a construct RE2 cannot take: {pattern}")
    return f"^(?:{spelled})$"


_TIME_RE2 = _for_re2(TIME_PATTERN)


class _Entry(msgspec.Struct):
    config: msgspec.Raw


class _Page(msgspec.Struct):
    consumers: list[_Entry] | None = None


_CONFIGS = msgspec.json.Decoder(_Page)


@dataclass
class ListRead:
    """A cycle's pages as read here: the sample columns (times as the server's text), the same as
    the page path's Python lists (what the window and the lag reader take), and what the page path
    would have added beside them."""

    columns: dict[str, pa.Array]
    samples: dict[str, list[Any]]
    filters: list[tuple[str, ...]] = field(default_factory=list)
    configs: list[dict[str, Any]] = field(default_factory=list)
    last_ts: list[Any] = field(default_factory=list)  # each stream's last entry's `ts`, before filtering
    replicas: list[Any] = field(default_factory=list)  # each entry's `cluster.replicas`, as the leader reports them

    def into(self, batch: SampleBatch) -> None:
        """Hand the read to a cycle's batch, as the page path would have filled it."""
        batch.samples, batch.arrow, batch.filters, batch.configs = self.samples, self.columns, self.filters, self.configs
        for i, replicas in enumerate(self.replicas):
            note_quorum(batch, (self.samples["account"][i], self.samples["stream"][i], self.samples["consumer"][i]),
                        replicas)


def _lists(columns: dict[str, pa.Array]) -> dict[str, list[Any]]:
    n = len(columns["consumer"])
    lists = {name: column.to_pylist() for name, column in columns.items()}
    return {name: lists[name] if name in lists else [None] * n for name in SAMPLE_COLUMNS}


def _entries(raws: list[bytes]) -> tuple[pa.StructArray, list[int]] | None:
    """Every entry of the pages, in order, and how many each page holds."""
    if not raws:
        return pa.array([], _INFO), []
    try:
        for raw in raws:
            raw.decode()
    except UnicodeDecodeError:
        return None
    block = max(1 << 22, 2 * max(map(len, raws)))
    try:
        table = pj.read_json(pa.py_buffer(b"\n".join(raws)), read_options=pj.ReadOptions(block_size=block),
                             parse_options=_PARSE)
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    if table.num_rows != len(raws):
        return None
    lists = table.column("consumers").combine_chunks()
    counts = pc.fill_null(pc.list_value_length(lists), 0).to_pylist()
    infos = lists.flatten()
    if infos.null_count:
        return None
    return infos, counts


def _fields(struct: pa.Array) -> dict[str, pa.Array]:
    """A struct's fields, each null where the struct is."""
    return {f.name: column for f, column in zip(struct.type, struct.flatten())}


def _first_groups(groups: pa.ListArray) -> dict[str, pa.Array] | None:
    """Each entry's first priority group (the one the server reports the pin under), null where
    it has none."""
    flat = groups.flatten()
    if flat.null_count:
        return None
    lengths = np.asarray(pc.fill_null(pc.list_value_length(groups), 0))
    has = lengths > 0
    offsets = np.asarray(groups.offsets)
    index = np.zeros(len(groups), dtype=np.int64)
    index[has] = offsets[:-1][has] - offsets[0]
    return _fields(flat.take(pa.array(index, mask=~has)))


def _times_match(column: pa.Array) -> bool:
    if column.null_count == len(column):
        return True
    return pc.all(pc.match_substring_regex(column, _TIME_RE2), skip_nulls=True).as_py() is not False


def _not_empty(column: pa.Array) -> bool:
    return column.null_count == 0 and (len(column) == 0 or pc.min(pc.binary_length(column)).as_py() > 0)


@dataclass(frozen=True)
class Listing:
    """One stream's consumer entries as the server sent them: its CONSUMER.LIST pages, or a JSZ
    report's `consumer_detail` of it (wrapped as one page), with where they came from."""

    stream: str  # the stream as listed (a JSZ entry's own `stream_name` is what is stored)
    pages: list[bytes]
    scope: Scope


# Which entries to keep, given each one's listing and name and `cluster.leader` (all in order);
# called once per cycle, before the checks, as the page path filters before it checks.
RowFilter = Callable[[list[Listing], list[str], list[Any]], list[bool]]


def read_pages(pages: list[tuple[str, list[bytes]]], scope: Scope, now_iso: str, name_filter: NameFilter,
               known_hashes: dict[tuple[str, str, str], str], previous: RawFingerprints,
               current: RawFingerprints) -> ListRead | None:
    """Each stream's CONSUMER.LIST pages (stream, raw pages) read as one; None when anything on
    them is not plainly well formed. `known_hashes` is updated as the page path updates it (only
    when the read is taken); `previous` is the last cycle's fingerprints; `current` gets this one's."""
    keep = None
    if name_filter.filters_consumers:
        keep = lambda listings, names, leaders: [name_filter.consumer_ok(n) for n in names]  # noqa: E731
    return read_listings([Listing(stream, got, scope) for stream, got in pages], now_iso, keep, known_hashes,
                         previous, current)


def read_listings(listings: list[Listing], now_iso: str, keep: RowFilter | None,
                  known_hashes: dict[tuple[str, str, str], str], previous: RawFingerprints,
                  current: RawFingerprints) -> ListRead | None:
    """The listings read as one (see read_pages); `keep` chooses the entries taken."""
    raws = [raw for listing in listings for raw in listing.pages]
    read = _entries(raws)
    if read is None:
        return None
    infos, counts = read
    try:
        configs = [entry.config for raw in raws for entry in (_CONFIGS.decode(raw).consumers or ())]
    except (msgspec.DecodeError, RecursionError):
        return None
    if len(configs) != len(infos):
        return None
    f = _fields(infos)
    if not (_not_empty(f["stream_name"]) and _not_empty(f["name"]) and f["config"].null_count == 0):
        return None

    per_listing, first = [], 0
    for listing in listings:
        per_listing.append(sum(counts[first:first + len(listing.pages)]))
        first += len(listing.pages)
    ts = f["ts"]
    last_ts = [ts[int(end) - 1].as_py() if entries else None
               for entries, end in zip(per_listing, np.cumsum(per_listing))]
    rows = [listing for listing, entries in zip(listings, per_listing) for _ in range(entries)]

    if keep is not None:
        kept = np.asarray(keep(rows, f["name"].to_pylist(), _fields(f["cluster"])["leader"].to_pylist()), dtype=bool)
        if not kept.all():
            infos = infos.filter(pa.array(kept))
            configs = [config for config, taken in zip(configs, kept) if taken]
            rows = [row for row, taken in zip(rows, kept) if taken]
            f = _fields(infos)
    return _assemble(f, configs, [row.scope for row in rows], now_iso, known_hashes, previous, current, last_ts)


def _scoped(scopes: list[Scope], part: str) -> pa.Array:
    """One field of each entry's scope, as a column (one value repeated where all are the same)."""
    values = [getattr(scope, part) for scope in scopes]
    if values and values.count(values[0]) == len(values):
        return pa.repeat(pa.scalar(values[0], pa.string()), len(values))
    return pa.array(values, pa.string())


def _assemble(f: dict[str, pa.Array], configs: list[msgspec.Raw], scopes: list[Scope], now_iso: str,
              known_hashes: dict[tuple[str, str, str], str], previous: RawFingerprints, current: RawFingerprints,
              last_ts: list[Any]) -> ListRead | None:
    delivered, ack_floor, cluster = _fields(f["delivered"]), _fields(f["ack_floor"]), _fields(f["cluster"])
    groups = _first_groups(f["priority_groups"])
    if groups is None:
        return None
    paused = pc.fill_null(f["paused"], False)
    pause_until = pc.if_else(paused, _fields(f["config"])["pause_until"], pa.scalar(None, pa.string()))
    if not all(map(_times_match, (f["ts"], f["created"], delivered["last_active"], ack_floor["last_active"],
                               pause_until, groups["pinned_ts"]))):
        return None
    leader = cluster["leader"]
    pinned_id = pc.if_else(pc.fill_null(pc.not_equal(groups["pinned_client_id"], ""), False),
                           groups["pinned_client_id"], pa.scalar(None, pa.string()))
    pinned_ts = pc.if_else(pc.and_(pc.is_valid(pinned_id), pc.fill_null(pc.not_equal(groups["pinned_ts"], ZERO_TIME), False)),
                           groups["pinned_ts"], pa.scalar(None, pa.string()))
    columns = {
        "ts": pc.fill_null(f["ts"], now_iso),
        "server": pc.if_else(pc.fill_null(pc.not_equal(leader, ""), False), leader, _scoped(scopes, "server")),
        "cluster": cluster["name"], "domain": _scoped(scopes, "domain"),
        "account": _scoped(scopes, "account"), "stream": f["stream_name"],
        "consumer": f["name"], "created": f["created"], "num_pending": f["num_pending"],
        "num_ack_pending": f["num_ack_pending"], "num_waiting": f["num_waiting"],
        "num_redelivered": f["num_redelivered"], "delivered_consumer_seq": delivered["consumer_seq"],
        "delivered_stream_seq": delivered["stream_seq"], "delivered_last_active": delivered["last_active"],
        "ack_floor_consumer_seq": ack_floor["consumer_seq"], "ack_floor_stream_seq": ack_floor["stream_seq"],
        "ack_floor_last_active": ack_floor["last_active"], "paused": paused, "pause_until": pause_until,
        "pin_group": groups["group"], "pinned_id": pinned_id, "pinned_ts": pinned_ts, "leader": leader,
    }
    try:
        samples = _lists(columns)
    except UnicodeDecodeError:  # checked for above; a string Arrow cannot give back is refused all the same
        return None
    read = ListRead(columns, samples, last_ts=last_ts,
                    replicas=cluster["replicas"].to_pylist() if cluster["replicas"].null_count < len(leader) else [])
    if not _configs(read, configs, scopes, now_iso, known_hashes, previous, current):
        return None
    return read


def _configs(read: ListRead, configs: list[msgspec.Raw], scopes: list[Scope], now_iso: str,
             known_hashes: dict[tuple[str, str, str], str], previous: RawFingerprints,
             current: RawFingerprints) -> bool:
    """Each consumer's filters, and a config row for each config whose hash changed; False for a
    config that is not an object or has a field of the wrong type."""
    samples = read.samples
    changed = []
    stored: dict[tuple[str, str, str], str] = {}  # the hashes this cycle stores, entry by entry as the page path
    for i, (account, stream, name, made, raw) in enumerate(zip(samples["account"], samples["stream"],
                                                               samples["consumer"], samples["created"], configs)):
        key = (account, stream, name)
        exact = bytes(raw)
        seen = previous.get(key)
        config = None
        if seen is None or seen[0] != exact or seen[1] != made:
            try:
                config = json.loads(exact)
                if type(config) is not dict:
                    return False
                check_config(config)
            except (ValueError, RecursionError, MalformedState):
                return False
            seen = (exact, made, config_hash(config) + (made or ""), filter_subjects(config))
        current[key] = seen
        read.filters.append(seen[3])
        if (stored[key] if key in stored else known_hashes.get(key)) != seen[2]:
            stored[key] = seen[2]
            changed.append((i, key, config if config is not None else json.loads(exact), seen))
    known_hashes.update(stored)
    for i, key, config, (_, made, digest, filters) in changed:
        info = {"ts": samples["ts"][i], "stream_name": key[1], "name": key[2], "created": made}
        read.configs.append(config_row(info, config, scopes[i], now_iso, digest, filters))
    return True
