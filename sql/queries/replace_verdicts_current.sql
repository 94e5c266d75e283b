-- This cycle's verdicts (the registered Arrow table `verdict_batch`) become the current ones.
DELETE FROM verdicts_current;
INSERT INTO verdicts_current BY NAME
SELECT account, stream, consumer, verdict, level, reason, findings::JSON AS findings,
       since::TIMESTAMPTZ AS since, judged_at::TIMESTAMPTZ AS judged_at, samples,
       delivered_per_second, acked_per_second, redelivered_per_second,
       eta_state, eta_seconds, eta_low_seconds, eta_high_seconds
FROM verdict_batch;
