-- Unpins per consumer and reason since $since (the health window): what a FLAPPING verdict says
-- its switches were. An unpin jetwatch inferred from samples counts as 'inferred'.
SELECT account, stream, consumer,
       CASE WHEN source = 'inferred' THEN 'inferred' ELSE coalesce(reason, 'unknown') END AS reason,
       count(*) AS unpins
FROM pin_events
WHERE event = 'unpinned' AND ts >= $since
GROUP BY ALL;
