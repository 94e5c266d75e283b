"""The audit log: append-only rows, each chained to the one before by a SHA-256 hash.

A row's hash covers its own fields and the previous row's hash, so changing, inserting or
removing a row anywhere but at the very end breaks every hash after it; `verify` walks the chain
and says where. Appending reads the head and writes the next row in the store's one write
transaction, and DuckDB lets one writer at a time hold the file, so two processes never chain
onto the same head. (Cutting rows off the end leaves a shorter valid chain: keep the head `verify`
prints elsewhere, and give it back to `verify` to catch that.) Only rows written before the store
had a chain may lack a chain position; any other such row is a break.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import duckdb

from jetwatch import sql
from jetwatch.store.database import Store, StoreError, one_row

GENESIS = "0" * 64
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# The chained fields, in hash order; `seq` and `prev_hash` are added by append().
FIELDS = ("ts_us", "actor", "origin", "action", "account", "stream", "consumer", "group_name", "parameters",
          "outcome", "reply", "action_id", "phase")


class AuditWriteFailed(StoreError):
    """An audit row could not be written; the message says whether anything was sent."""


@dataclass(frozen=True)
class AuditRow:
    ts: dt.datetime
    actor: str
    origin: str
    action: str
    account: str | None
    stream: str
    consumer: str
    group_name: str | None
    parameters: str  # JSON text
    outcome: str
    reply: str | None
    action_id: str
    phase: str  # intent | outcome | event

    def chained(self) -> dict[str, Any]:
        values = {f: getattr(self, f) for f in FIELDS if f != "ts_us"}
        values["ts_us"] = (self.ts - _EPOCH) // dt.timedelta(microseconds=1)
        return values


def row_hash(seq: int, prev_hash: str, values: dict[str, Any]) -> str:
    """SHA-256 over the previous hash, the sequence number and the fields, as canonical JSON."""
    doc = json.dumps([prev_hash, seq, [values.get(f) for f in FIELDS]], separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(doc.encode()).hexdigest()


def append(con: duckdb.DuckDBPyConnection, row: AuditRow) -> int:
    """Chain `row` onto the head, inside the caller's write transaction; returns its seq."""
    head = con.execute(sql.query("audit_chain_head")).fetchone()
    seq, prev = (head[0] + 1, head[1]) if head else (1, GENESIS)
    values = row.chained()
    con.execute(sql.query("insert_audit"), {
        "ts": row.ts, "actor": row.actor, "origin": row.origin, "action": row.action, "account": row.account,
        "stream": row.stream, "consumer": row.consumer, "group_name": row.group_name,
        "parameters": row.parameters, "outcome": row.outcome, "reply": row.reply, "seq": seq,
        "action_id": row.action_id, "phase": row.phase, "prev_hash": prev,
        "row_hash": row_hash(seq, prev, values)})
    return seq


def write(store: Store, row: AuditRow) -> int:
    """Append one row in its own transaction. Any failure (a held lock, a file from an older or
    damaged schema) comes back as AuditWriteFailed in words, never as a raw DuckDB error."""
    try:
        return store.write(lambda con: append(con, row))
    except StoreError as exc:
        raise AuditWriteFailed(str(exc)) from None
    except (duckdb.Error, OSError) as exc:
        raise AuditWriteFailed(f"the store {store.path} refused the audit row ("
                               f"{' '.join(str(exc).split())[:300]})") from None


@dataclass
class Verdict:
    rows: int = 0
    unchained: int = 0
    head: str = GENESIS
    head_seq: int = 0
    breaks: list[str] = field(default_factory=list)
    open_actions: list[str] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return not self.breaks

    @property
    def head_to_keep(self) -> str:
        """`SEQ:HASH` of the last row: kept elsewhere and given back to `verify`, it shows rows cut off the end."""
        return f"{self.head_seq}:{self.head}"


def _rows(cur: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def verify(store: Store, kept_head: str | None = None) -> Verdict:
    """Walk the chain in seq order and say every place where it does not hold: a row changed, one
    missing, one that does not follow the one before, a row without a chain position that is not
    from before the chain, and, given the head kept from an earlier run (`SEQ:HASH`, or the hash),
    a chain that no longer holds it (rows cut off its end, or the chain rebuilt)."""
    def read(con: duckdb.DuckDBPyConnection) -> tuple[list[dict[str, Any]], int, list[dict[str, Any]]]:
        chain = _rows(con.execute(sql.query("audit_chain")))
        unchained = one_row(con.execute(sql.query("audit_unchained_count")))[0]
        return chain, unchained, _rows(con.execute(sql.query("audit_outside_chain")))

    try:
        chain, unchained, outside = store.read(read)
    except duckdb.Error as exc:
        raise StoreError(f"cannot read the audit chain of {store.path} ({' '.join(str(exc).split())[:200]}): a "
                         "store from before schema version 3 has none yet; any jetwatch command that writes to "
                         "it (collect, an action) upgrades it") from None
    verdict = Verdict(rows=len(chain), unchained=unchained - len(outside))
    for r in outside:
        at = (_EPOCH + dt.timedelta(microseconds=r["ts_us"])).isoformat() if r["ts_us"] is not None else "no time"
        verdict.breaks.append(f"a row without a chain position was written after the chain began ({r['action']} "
                              f"{r['stream']}/{r['consumer']} by {r['actor']}, {r['outcome']}, at {at}): only rows "
                              "from before the chain may lack one, so it was put in by hand")
    prev, expected_seq = GENESIS, 1
    phases: dict[str, list[str]] = {}
    for r in chain:
        seq = r["seq"]
        where = f"row {seq} ({r['action']} {r['stream']}/{r['consumer']} by {r['actor']}, {r['phase']})"
        if seq != expected_seq:
            verdict.breaks.append(f"rows {expected_seq}..{seq - 1} are missing before {where}")
        if r["prev_hash"] != prev:
            verdict.breaks.append(f"{where} does not follow the row before it: that row was changed or removed")
        if row_hash(seq, r["prev_hash"], r) != r["row_hash"]:
            verdict.breaks.append(f"{where} was changed after it was written: its hash does not match its contents")
        prev, expected_seq = r["row_hash"], seq + 1
        phases.setdefault(r["action_id"], []).append(r["phase"])
    verdict.head, verdict.head_seq = prev, expected_seq - 1
    verdict.open_actions = [a for a, p in phases.items() if p == ["intent"]]
    if kept_head:
        verdict.breaks += _against_kept_head(chain, kept_head)
    return verdict


def _against_kept_head(chain: list[dict[str, Any]], kept: str) -> list[str]:
    """The break, if any, of a chain that should still hold the head kept from an earlier run."""
    seq_text, _, hash_ = kept.strip().rpartition(":")
    found = [r for r in chain if r["row_hash"] == hash_ and (not seq_text or str(r["seq"]) == seq_text)]
    if found:
        return []
    return [f"the head kept ({kept.strip()}) is not in the chain: rows were cut off its end after that head was "
            "printed, or the chain was rebuilt"]
