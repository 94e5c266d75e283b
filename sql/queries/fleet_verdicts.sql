-- Live state of every consumer with the verdict the collector judged after its last cycle.
SELECT l.account, l.stream, l.consumer, l.ts, l.server, l.cluster, l.num_pending, l.num_ack_pending,
       l.num_waiting, l.num_redelivered, l.paused, l.pause_until, l.pin_group, l.pinned_id, l.pinned_ts,
       l.leader, l.is_pull, l.filtered, l.max_ack_pending, l.max_waiting, l.priority_policy,
       l.priority_groups, v.verdict, v.level, v.reason, v.findings, v.since, v.judged_at,
       v.delivered_per_second, v.acked_per_second, v.redelivered_per_second
FROM consumer_latest l
LEFT JOIN verdicts_current v USING (account, stream, consumer);
