-- Live state of every consumer with the verdict the collector judged after its last cycle: only
-- the columns the Fleet page shows (its cost grows with consumers, not with samples stored).
-- Worst first: $severity lists the verdicts from worst to best (health/rules.py's order), a
-- consumer not judged yet reads COLLECTING; within a verdict the oldest waiting work, then the
-- biggest backlog. The pin's holder is the one its worker announced (pin_holders), if any.
-- $consumer NULL: every consumer; set: that one only (the Consumer page's verdict; $account NULL:
-- in whichever account).
SELECT l.account, l.stream, l.consumer, l.ts, l.num_pending, l.num_ack_pending, l.num_waiting,
       l.paused, l.pin_group, l.pinned_id, l.pinned_ts, l.max_ack_pending, l.max_waiting,
       l.priority_policy, v.verdict, v.reason, v.findings::VARCHAR AS findings,
       coalesce(v.config_findings::VARCHAR, '[]') AS config_findings, v.since, v.unhealthy_since,
       v.delivered_per_second, v.acked_per_second, v.redelivered_per_second,
       l.oldest_unacked_age_seconds, l.oldest_unacked_age_kind, v.eta_state, v.eta_seconds,
       v.eta_low_seconds, v.eta_high_seconds, v.last_pull, v.last_ack, v.first_seen,
       h.name AS holder_name, h.verification AS holder_verification
FROM consumer_latest l
LEFT JOIN verdicts_current v USING (account, stream, consumer)
LEFT JOIN pin_holders h ON h.pin_id = l.pinned_id AND h.account IS NOT DISTINCT FROM l.account AND h.stream = l.stream
          AND h.consumer = l.consumer
WHERE $consumer IS NULL OR (($account IS NULL OR l.account = $account) AND l.stream = $stream AND l.consumer = $consumer)
ORDER BY list_position($severity, coalesce(v.verdict, 'COLLECTING')),
         coalesce(l.oldest_unacked_age_seconds, -1) DESC, l.num_pending DESC NULLS LAST, l.stream, l.consumer;
