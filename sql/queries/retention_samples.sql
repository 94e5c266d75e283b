-- The unsealed samples of the consumer-hours retention_covered_hours.sql found, but the current
-- cycle's (the live state, however old a server's clock says they are: a later pass takes them).
DELETE FROM samples_recent AS s USING covered_hours AS c
WHERE s.ts < $cutoff AND s.cycle IS DISTINCT FROM (SELECT cycle FROM current_cycle) AND s.account = c.account AND s.stream = c.stream AND s.consumer = c.consumer
  AND date_trunc('hour', timezone('UTC', s.ts)) = c.hour;
