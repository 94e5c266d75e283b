-- Events per consumer in the health window: pin switches, naks, max-delivery hits.
SELECT account, stream, consumer,
       count(*) FILTER (WHERE kind = 'consumer_group_pinned') AS pin_switches,
       count(*) FILTER (WHERE kind = 'nak') AS nak_count,
       count(*) FILTER (WHERE kind = 'max_deliver') AS max_deliveries_count
FROM advisories
WHERE ts >= $since AND stream IS NOT NULL
GROUP BY ALL;
