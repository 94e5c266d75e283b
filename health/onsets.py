"""When each incident began: the onset features of the health window.

A rule that must hold in every sample of a window names an incident only once the window has
passed, and one sample from before the incident hides it. The rules read these features instead:
for each condition, the start of the trailing run of samples in which it has held without a break
(its onset, NaN when it does not hold in the latest sample), so that a rule fires once its
condition has held for its own duration (Prometheus' `for:`) and its *since* is the incident's
start.

Activity is read from the server's own clocks, not from sequence numbers: `delivered.last_active`
(a delivery, a redelivery, a `+WPI` progress report, a delayed nak) and `ack_floor.last_active`
(an acknowledgement; a message dropped at max_deliver or by the stream's limits moves the ack
floor but not this time). Onsets take the later of the run's start and the last such activity, so
a delivery between two samples is not missed.

Each consumer's own rhythm sets how long is too long: the longest gap between acknowledgements
while work was in flight, between deliveries while work was pending, and the longest stretch the
oldest unacknowledged age grew before the consumer caught up, all as seen in the window. A worker
that acknowledges in bulk every minute, a holder that polls every 45 s, bursts drained in a
sawtooth: each is judged against itself, not against one threshold for all.

How each is computed, for every consumer in one compiled pass over its samples:
health/window_pass.py. Where there is no onset (the condition does not hold in the latest
sample) it is NaN. The rhythms cost a pass over the whole window each, so a judge asks for them
only where a condition has held long enough to matter or messages were redelivered in the window (`rhythm_after`, health/rules.py): a rhythm
only ever raises a rule's duration above one at least that long, so this changes no verdict.
"""

from __future__ import annotations

# Below this age (seconds) the oldest unacknowledged message is as fresh as processing allows:
# the consumer has caught up.
CAUGHT_UP_AGE = 5.0

ONSET_FEATURES = [
    "stall_onset", "ack_gap_max", "stall_grew", "stall_redelivered", "quiet_since",
    "idle_onset", "pin_idle_onset", "pull_gap_max", "pullers_seen",
    "delivered_last_active", "acked_last_active",
    "age_rise_onset", "age_rise", "age_rise_gap_max",
    "behind_onset", "behind_rise", "behind_gap_max", "behind_backlog_rise",
    "first_ts", "last_seconds", "redelivered_onset",
]
RHYTHMS = ("ack_gap_max", "pull_gap_max", "age_rise_gap_max", "behind_gap_max")
