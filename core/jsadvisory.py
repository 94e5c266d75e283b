"""Typed view of the consumer advisories the server publishes on `$JS.EVENT.ADVISORY.CONSUMER.>`:
every field jetwatch reads of one, by name and type, declared once.

One struct covers every kind (PINNED, UNPINNED, MSG_NAKED, MAX_DELIVERIES, ...): each kind sends a
subset of these fields (nats-server's jetstream_events.go), the others stay None, and fields
jetwatch does not read (a leader election's `replicas`) are left out. Anyone allowed to publish on
the advisory subjects can write one, so the collector checks a message field by field, saying
which is wrong, before it takes this view (collectors/advisories.py); `Advisory.of` then cannot
fail on it.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

TYPE_PREFIX = "io.nats.jetstream.advisory.v1."
PINNED = "consumer_group_pinned"
UNPINNED = "consumer_group_unpinned"


class Advisory(msgspec.Struct, kw_only=True):
    """One consumer advisory. The optional names come first and the counts last, in the order the
    collector checks them: its first complaint about a message names the first of them that is wrong."""

    type: str  # TYPE_PREFIX + the kind
    id: str
    timestamp: str  # RFC 3339
    account: str | None = None  # pin advisories only; the consumer's account
    stream: str | None = None
    consumer: str | None = None
    domain: str | None = None
    group: str | None = None  # pin advisories
    pinned_id: str | None = None  # PINNED: the new pin
    reason: str | None = None  # UNPINNED ("admin", "timeout"), MSG_TERMINATED (the client's words)
    action: str | None = None  # the CREATED and DELETED advisories: "create", "delete"
    leader: str | None = None  # LEADER_ELECTED
    stream_seq: int | None = None  # the message a delivery advisory is about
    consumer_seq: int | None = None
    deliveries: int | None = None

    @classmethod
    def of(cls, doc: Mapping[str, object]) -> Advisory:
        """The view of an advisory's JSON object; msgspec.ValidationError if a field has another type."""
        return msgspec.convert(doc, cls)

    @property
    def kind(self) -> str:
        """The type without its prefix: `consumer_group_pinned`, `nak`, ... (the store's `kind`)."""
        return self.type.removeprefix(TYPE_PREFIX)


def _named(kind: object) -> tuple[str, ...]:
    return tuple(f.name for f in msgspec.structs.fields(Advisory) if f.type == kind and not f.required)


# The optional fields by type, in declaration order: what the collector checks each message for.
OPTIONAL_TEXT = _named(str | None)
OPTIONAL_COUNTS = _named(int | None)
