-- The latest limits of every consumer (the health rules and saturation need them).
SELECT account, stream, consumer, is_pull, filtered, max_ack_pending, max_waiting, priority_policy, ack_wait_ns,
       priority_timeout_ns
FROM consumer_configs
QUALIFY row_number() OVER (PARTITION BY account, stream, consumer ORDER BY ts DESC) = 1;
