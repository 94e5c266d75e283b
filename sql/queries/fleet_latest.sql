-- Live state of every consumer seen in the latest cycle, with its limits.
SELECT account, stream, consumer, ts, server, cluster, num_pending, num_ack_pending, num_waiting,
       num_redelivered, paused, pause_until, pin_group, pinned_id, pinned_ts, leader, is_pull,
       filtered, max_ack_pending, max_waiting, priority_policy, priority_groups, ack_wait_ns,
       max_deliver, priority_timeout_ns, oldest_unacked_age_seconds, oldest_unacked_age_kind,
       oldest_undelivered_age_seconds, oldest_undelivered_age_kind, time_to_loss_seconds,
       loss_limit, stream_room_messages
FROM consumer_latest;
