-- The latest config of every consumer the store knows, sampled yet or not (consumer_latest's
-- config columns): a collector keeps them in memory, so a consumer whose config was written
-- before its first sample (its stream's listing failed that cycle) is judged with its limits; and
-- the metadata of those whose config names an `io.` key (their own thresholds, health/thresholds.py).
SELECT account, stream, consumer, is_pull, filtered, max_ack_pending, max_waiting, priority_policy,
       priority_groups, ack_wait_ns, max_deliver, priority_timeout_ns,
       CASE WHEN contains(config_json::VARCHAR, '"io.') THEN json_extract(config_json, '$.metadata')::VARCHAR
       END AS monitor_metadata
FROM consumer_configs
QUALIFY row_number() OVER (PARTITION BY account, stream, consumer ORDER BY ts DESC) = 1;
