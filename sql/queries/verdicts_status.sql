-- The fleet's verdicts for `jetwatch status` and `jetwatch check`, with each consumer's time lag and
-- its pin's announced holder, and the metadata of those whose config names an `io.` key (their own
-- thresholds, health/thresholds.py), and what failover readiness reads (waiting pulls, pending, in
-- flight, max_ack_pending, policy).
SELECT v.account, v.stream, v.consumer, v.verdict, v.level, v.reason, v.since, v.unhealthy_since, v.judged_at,
       v.findings,
       coalesce(v.config_findings::VARCHAR, '[]') AS config_findings,
       c.oldest_unacked_age_seconds, c.oldest_unacked_age_kind, c.oldest_undelivered_age_seconds,
       c.oldest_undelivered_age_kind, c.time_to_loss_seconds, c.loss_limit, c.stream_room_messages, v.eta_state, v.eta_seconds, v.eta_low_seconds, v.eta_high_seconds,
       c.pinned_id, h.name AS holder_name, h.verification AS holder_verification, h.host AS holder_host,
       h.pid AS holder_pid, h.version AS holder_version,
       CASE WHEN contains(cfg.config_json::VARCHAR, '"io.') THEN json_extract(cfg.config_json, '$.metadata')::VARCHAR
       END AS monitor_metadata,
       c.num_waiting, c.num_pending, c.num_ack_pending, cfg.max_ack_pending, cfg.priority_policy
FROM verdicts_current v
LEFT JOIN consumer_current c USING (account, stream, consumer)
LEFT JOIN pin_holders h ON h.pin_id = c.pinned_id AND h.account IS NOT DISTINCT FROM v.account AND h.stream = v.stream
          AND h.consumer = v.consumer
LEFT JOIN (SELECT account, stream, consumer, config_json, max_ack_pending, priority_policy FROM consumer_configs
           QUALIFY row_number() OVER (PARTITION BY account, stream, consumer ORDER BY ts DESC) = 1) cfg
       USING (account, stream, consumer)
ORDER BY v.account, v.stream, v.consumer;
