"""The Consumer page's dropped messages: what the consumer gave up on and what is about to be.

Plain functions over the store (no streamlit): the messages it dropped (max_deliver exhausted or
terminated), each with the line that reads it, and the naked messages it still owes with the
deliveries max_deliver leaves them.
"""

from __future__ import annotations

import datetime as dt
import shlex

import pandas as pd

from jetwatch.health import drops
from jetwatch.store.database import Store

READS = {"found": "read", "gone": "gone: the stream no longer has it", "refused": "not read: refused"}
LINES_SHOWN = 5  # `nats stream get` lines under the table, newest first


def dropped(store: Store, account: str, stream: str, consumer: str, limit: int = 200) -> pd.DataFrame:
    """The consumer's newest `limit` dropped messages, newest first (consumer_dropped)."""
    return store.query("consumer_dropped", {"account": account, "stream": stream, "consumer": consumer, "limit": limit})


def naks_left(store: Store, account: str, stream: str, consumer: str, since: dt.datetime) -> pd.DataFrame:
    """Naked messages still owed since `since`, with deliveries left before max_deliver drops them."""
    return store.query("consumer_nak_remaining",
                       {"account": account, "stream": stream, "consumer": consumer, "since": since})


def get_line(stream: str, seq: int) -> str:
    """The natscli line that reads a stream's message (the operator's rights permitting)."""
    return f"nats stream get {shlex.quote(stream)} {int(seq)}"


def _when(value: object) -> str:
    return "" if value is None or pd.isna(value) else pd.Timestamp(value).strftime("%Y-%m-%d %H:%M:%S")


def table(frame: pd.DataFrame, stream: str) -> pd.DataFrame:
    """The dropped messages in words: no None in any cell; what a read found, or why there is no subject."""
    def subject(r: pd.Series) -> str:
        if isinstance(r["message_subject"], str):
            return r["message_subject"]
        return {"gone": "(gone before it was read)", "refused": f"(not read: {r['read_note'] or 'refused'})"}.get(
            r["read_state"], "(not read yet)")

    return pd.DataFrame({
        "Stream seq": frame["stream_seq"].astype("int64"),
        "Subject": [subject(r) for _, r in frame.iterrows()],
        "Stored (UTC)": [_when(t) for t in frame["message_time"]],
        "Dropped (UTC)": [_when(t) for t in frame["ts"]],
        "Deliveries": [("" if pd.isna(n) else str(int(n))) for n in frame["deliveries"]],
        "Reason": [drops.said(by, why) for by, why in zip(frame["dropped_by"], frame["reason"])],
        "Read it with": [get_line(stream, seq) if drops.readable(by, why, state) else "(the stream no longer has it)"
                         for seq, by, why, state in zip(frame["stream_seq"], frame["dropped_by"], frame["reason"],
                                                        frame["read_state"])],
    })


def readable_lines(frame: pd.DataFrame, stream: str, shown: int = LINES_SHOWN) -> list[str]:
    """The read lines of the newest dropped messages a read can still reach."""
    keep = [drops.readable(by, why, state) for by, why, state in
            zip(frame["dropped_by"], frame["reason"], frame["read_state"])]
    return [get_line(stream, seq) for seq in frame["stream_seq"][keep].head(shown)]


def causes(counts: pd.DataFrame) -> dict[str, int]:
    """How many dropped messages each cause (health/drops.py) accounts for, from their counts by
    advisory kind and reason (consumer_dropped_counts)."""
    found: dict[str, int] = {}
    for by, why, n in zip(counts["dropped_by"], counts["reason"], counts["dropped"]):
        c = drops.cause(by, why)
        found[c] = found.get(c, 0) + int(n)
    return found


def naks_table(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "Stream seq": frame["stream_seq"].astype("int64"),
        "Deliveries": frame["deliveries"].astype("Int64").astype(str),
        "Left before dropped": [("no max_deliver: redelivered without end" if pd.isna(m) else str(int(n)))
                                for m, n in zip(frame["max_deliver"], frame["deliveries_left"])],
        "Last nak (UTC)": [_when(t) for t in frame["last_nak"]],
    })
