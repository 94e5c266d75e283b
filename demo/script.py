"""What the demo scripts on each of its consumers, and what jetwatch should say about it.

One declaration, read by the workload's docs, by the Fleet (beside `jetwatch up`'s demo, so a
newcomer can tell whether a verdict is right) and by the tests that hold every demo consumer to
an entry here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scripted:
    stream: str
    consumer: str
    trouble: str  # what the workload does to it
    expect: str  # what jetwatch should show


SCRIPT: tuple[Scripted, ...] = (
    Scripted("ORDERS", "fulfilment",
             "three workers share a pinned_client group; on a loop the pinned one stalls (the server unpins it "
             "after its 5 s priority_timeout), an operator unpins it, and one worker dies and comes back 10 s later",
             "pin switches with reasons timeout and admin on the Pins page; FLAPPING when switches pile up in the "
             "health window; the pin holder and since when on the Consumer page"),
    Scripted("ORDERS", "billing",
             "an overflow group: the main worker takes everything, a second pulls only when 50 or more wait",
             "OK, the overflow worker's pulls waiting beside the main one's"),
    Scripted("ORDERS", "archive",
             "a filtered consumer (orders.archived) that nobody pulls from while messages arrive",
             "NO_PULLERS: work pending, nothing in flight, no client pulling (named once idle for half the health "
             "window, as it was never seen pulling); start a worker"),
    Scripted("EVENTS", "audit-log",
             "a prioritized group with two workers at priority 0 and 1",
             "OK"),
    Scripted("EVENTS", "analytics",
             "one slow worker (80 ms a message) against bursts of 30 every third stretch: a backlog builds "
             "and drains as a sawtooth",
             "LAGGING: the oldest message keeps getting older and the backlog's low points keep rising "
             "(it falls behind); no drain ETA while it does"),
    Scripted("EVENTS", "notify",
             "a worker that pulls and never acknowledges (ack_wait 4 s, max_deliver 5)",
             "STALLED: messages handed out and none acknowledged, the server redelivering them; the messages "
             "dropped at max_deliver on the Consumer page"),
)
