-- The consumers operators forgot (an audited forget that went through) since a time, with when:
-- the collector drops those it holds no longer listed since before then.
SELECT account, stream, consumer, ts
FROM audit
WHERE action = 'forget' AND phase = 'outcome' AND outcome = 'ok' AND ts >= $since;
