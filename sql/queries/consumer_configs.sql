SELECT ts AS changed_at, created, max_ack_pending, max_waiting, ack_wait_ns, max_deliver,
       priority_policy, priority_groups, priority_timeout_ns, ack_policy, filtered, is_pull,
       config_json
FROM consumer_configs
WHERE account = $account AND stream = $stream AND consumer = $consumer
ORDER BY ts DESC;
