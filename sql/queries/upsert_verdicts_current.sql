-- The verdicts that changed this cycle (the registered Arrow table `verdict_batch`) replace their
-- consumers' rows, and every other row stays as it is.
DELETE FROM verdicts_current v
USING verdict_batch b
WHERE v.account = b.account AND v.stream = b.stream AND v.consumer = b.consumer;
INSERT INTO verdicts_current BY NAME
SELECT account, stream, consumer, verdict, level, reason, findings::JSON AS findings,
       since::TIMESTAMPTZ AS since, judged_at::TIMESTAMPTZ AS judged_at, samples,
       delivered_per_second, acked_per_second, redelivered_per_second,
       eta_state, eta_seconds, eta_low_seconds, eta_high_seconds,
       last_pull::TIMESTAMPTZ AS last_pull, last_ack::TIMESTAMPTZ AS last_ack,
       first_seen::TIMESTAMPTZ AS first_seen
FROM verdict_batch;
