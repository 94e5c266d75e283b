-- The consumers operators forgot (an audited forget that went through) since a time: the collector
-- drops them from what it holds no longer listed.
SELECT account, stream, consumer
FROM audit
WHERE action = 'forget' AND phase = 'outcome' AND outcome = 'ok' AND ts >= $since;
