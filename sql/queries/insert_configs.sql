INSERT INTO consumer_configs BY NAME
SELECT ts::TIMESTAMPTZ AS ts, account, stream, consumer, created::TIMESTAMPTZ AS created,
       config_hash, is_pull, filtered, ack_policy, max_waiting, max_ack_pending, ack_wait_ns,
       max_deliver, priority_policy, priority_groups, priority_timeout_ns, config_json::JSON AS config_json
FROM configs;
