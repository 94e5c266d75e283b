-- Advisories per consumer and minute: pin switches, naks and max-delivery hits for the verdicts.
SELECT account, stream, consumer, time_bucket(INTERVAL 1 MINUTE, ts) AS minute,
       count(*) FILTER (WHERE kind = 'consumer_group_pinned') AS pin_switches,
       count(*) FILTER (WHERE kind = 'nak') AS nak_count,
       count(*) FILTER (WHERE kind = 'max_deliver') AS max_deliveries_count
FROM advisories
WHERE ts >= $since AND ts < $until AND stream IS NOT NULL
GROUP BY ALL;
