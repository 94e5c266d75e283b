SELECT account, stream, consumer, config_hash
FROM consumer_configs
QUALIFY row_number() OVER (PARTITION BY account, stream, consumer ORDER BY ts DESC) = 1;
