"""Why a consumer dropped a message, told apart as the server tells it.

A message leaves a consumer unprocessed three ways, and each asks for something else: it reached
`max_deliver` (MAX_DELIVERIES: the handler keeps failing it), a client terminated it (+TERM, with
the client's reason), or it was removed from the stream while still owed (the server's own
MSG_TERMINATED, reason "Unacknowledged message was deleted": the stream's limits, a purge or a
delete took it before it was acknowledged, so the message is lost, not poison, and no read of it
can work).
"""

from __future__ import annotations

# nats-server's reason on the MSG_TERMINATED it sends for a message removed from the stream while
# pending (consumer.go, ackTermUnackedLimitsReason).
REMOVED_REASON = "Unacknowledged message was deleted"

MAX_DELIVER, TERMINATED, REMOVED = "max_deliver", "terminated", "removed"
WORDS = {
    MAX_DELIVER: "max_deliver reached",
    TERMINATED: "terminated by a client",
    REMOVED: "removed from the stream before it was acknowledged (its limits, a purge or a delete)",
}


def cause(dropped_by: object, reason: object) -> str:
    """MAX_DELIVER, TERMINATED or REMOVED for one dropped message (its advisory's kind and reason)."""
    if dropped_by == MAX_DELIVER:
        return MAX_DELIVER
    return REMOVED if isinstance(reason, str) and reason.strip() == REMOVED_REASON else TERMINATED


def said(dropped_by: object, reason: object) -> str:
    """The cause in words, with a client's own reason for a termination."""
    found = cause(dropped_by, reason)
    if found == TERMINATED and isinstance(reason, str) and reason.strip():
        return f"{WORDS[TERMINATED]}: {reason.strip()}"
    return WORDS[found]


def readable(dropped_by: object, reason: object, read_state: object) -> bool:
    """Whether a read of the message can still work: not once the stream removed it (said so by
    the server, or found gone by the collector's read)."""
    return cause(dropped_by, reason) != REMOVED and read_state != "gone"
