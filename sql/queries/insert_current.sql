INSERT INTO consumer_current BY NAME
SELECT * FROM cycle_samples
QUALIFY row_number() OVER (PARTITION BY account, stream, consumer ORDER BY ts DESC) = 1;
