-- The latest limits of every consumer (the health rules and saturation need them), and the
-- metadata of those whose config names an `io.` key (their own thresholds, health/thresholds.py),
-- as latest_configs.sql reads it for the collector.
SELECT account, stream, consumer, is_pull, filtered, max_ack_pending, max_waiting, priority_policy, ack_wait_ns,
       priority_timeout_ns,
       CASE WHEN contains(config_json::VARCHAR, '"io.') THEN json_extract(config_json, '$.metadata')::VARCHAR
       END AS monitor_metadata
FROM consumer_configs
QUALIFY row_number() OVER (PARTITION BY account, stream, consumer ORDER BY ts DESC) = 1;
