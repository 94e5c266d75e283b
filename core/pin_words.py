"""Who holds a pin, in the words every surface says it: the pages, `status --json`, `/metrics`
(`jetwatch_consumer_pin_info`'s `pin_holder`, which the alert rules quote) and the alerts the
collector posts. One function, so a holder reads the same wherever it is shown.

A pin id names one pin, not a client; the worker that holds it may announce itself
(core/pin_announce.py), and then it is named with how its announcement was checked
("worker-a · verified"); otherwise it is "unannounced" and the pin id's tail.
"""

from __future__ import annotations

from jetwatch.core.pin_announce import holder_words
from jetwatch.core.text import visible

PIN_TAIL = 6  # pin ids from one server share a long prefix (a NUID): their tail tells them apart


def pin_tail(pin_id: object) -> str:
    """The distinguishing part of a pin id: its last PIN_TAIL characters after an ellipsis ('' for
    no pin). Pin ids of one server share their first 12+ characters, so a prefix names nothing."""
    if not isinstance(pin_id, str) or pin_id == "":
        return ""
    text = visible(pin_id)
    return text if len(text) <= PIN_TAIL + 1 else "…" + text[-PIN_TAIL:]


def pin_holder(pin_id: object, name: object, verification: object) -> str:
    """Who holds a pin, as its worker announced it ("worker-a · verified"), or "unannounced" with the
    pin id's tail when no worker did ('' for no pin)."""
    tail = pin_tail(pin_id)
    if not tail:
        return ""
    return holder_words(visible(name) if isinstance(name, str) else None, verification) or f"unannounced {tail}"
