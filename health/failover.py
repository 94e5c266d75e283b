"""Failover readiness of a pinned_client group: is a standby client waiting right now?

The server reports one count, `num_waiting`: pull requests waiting, the holder's and everyone
else's together, with no count per client or per pin id (CONNZ shows no pulls either). What tells
them apart is how the server serves them (server/consumer.go `nextWaiting`): while a pin exists, a
pull carrying the pin id is served as soon as a message is pending, and a pull without it is passed
over and waits until it expires. So:

- with messages pending (and in flight below max_ack_pending), no pull of the holder can still be
  waiting: every waiting pull is a standby's;
- with nothing pending, the holder's own pull waits too: pulls beyond the holder's are a standby's,
  the holder counted as keeping at most `holder_pulls` (the --holder-pulls setting; 1 for a pull
  loop, 2 for clients that pull ahead such as the JavaScript client's consume()).

One sample can fall between a standby's pull expiring and its next one (a few milliseconds with a
pull loop), so a single `no_standby` is not news: the Consumer page and alerts read it over time.
No standby is a finding, not a verdict: one worker is a legitimate design; it says what happens if
the holder stops.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

STANDBY, NO_STANDBY, NO_HOLDER = "standby", "no_standby", "no_holder"
READINESS = (STANDBY, NO_STANDBY, NO_HOLDER)  # the values of the `readiness` metric label (bounded)
WORDS = {
    STANDBY: "a standby waits: if the holder stops, the pin moves to it after priority_timeout",
    NO_STANDBY: "No standby: if the holder stops, work stops until a new client pulls",
    NO_HOLDER: "nothing is pinned: the next client to pull when work is pending takes the pin",
}


def _num(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if out != out else out


def standby_pulls(waiting: Any, pending: Any, ack_pending: Any, max_ack_pending: Any, holder_pulls: int) -> int:
    """Waiting pulls that are not the holder's (see the module's docstring)."""
    w, p, a, m = _num(waiting), _num(pending), _num(ack_pending), _num(max_ack_pending)
    holder_served = p > 0 and not (m > 0 and a >= m)
    return int(max(0.0, w if holder_served else w - holder_pulls))


def readiness(policy: Any, pinned_id: Any, waiting: Any, pending: Any, ack_pending: Any, max_ack_pending: Any,
              holder_pulls: int) -> str | None:
    """STANDBY, NO_STANDBY or NO_HOLDER for a pinned_client consumer; None for any other."""
    if policy != "pinned_client":
        return None
    if not isinstance(pinned_id, str) or not pinned_id:
        return NO_HOLDER
    return STANDBY if standby_pulls(waiting, pending, ack_pending, max_ack_pending, holder_pulls) > 0 else NO_STANDBY


def _column(frame: pd.DataFrame, name: str) -> list[Any]:
    return frame[name].tolist() if name in frame else [None] * len(frame)


def readiness_column(frame: pd.DataFrame, holder_pulls: int) -> list[str | None]:
    """`readiness` of each row of a frame with priority_policy, pinned_id, num_waiting, num_pending,
    num_ack_pending and max_ack_pending (the live state)."""
    return [readiness(policy, pin, waiting, pending, ack_pending, max_ack, holder_pulls)
            for policy, pin, waiting, pending, ack_pending, max_ack in zip(
                _column(frame, "priority_policy"), _column(frame, "pinned_id"), _column(frame, "num_waiting"),
                _column(frame, "num_pending"), _column(frame, "num_ack_pending"), _column(frame, "max_ack_pending"))]


def finding(policy: Any, pinned_id: Any, waiting: Any, pending: Any, ack_pending: Any, max_ack_pending: Any,
            holder_pulls: int) -> dict[str, Any] | None:
    """What status --json and the Consumer page say: readiness, standby pulls, and the words."""
    r = readiness(policy, pinned_id, waiting, pending, ack_pending, max_ack_pending, holder_pulls)
    if r is None:
        return None
    return {"readiness": r, "standby_pulls": standby_pulls(waiting, pending, ack_pending, max_ack_pending, holder_pulls)
            if r != NO_HOLDER else int(_num(waiting)), "waiting": int(_num(waiting)), "finding": WORDS[r]}
