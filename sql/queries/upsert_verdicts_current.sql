-- The verdicts that changed this cycle (the registered Arrow table `verdict_batch`) replace their
-- consumers' rows, and every other row stays as it is. Rows already there are updated in place,
-- not deleted and inserted again: most cycles change only numbers (a drain ETA that moved), and
-- DuckDB keeps an update beside its row until the checkpoint, where a deleted row and its new
-- copy are both written out, more than twice the work. The INSERT (new consumers) runs only when the UPDATE's count is not the
-- batch's, and inserts only the consumers that have no row.
UPDATE verdicts_current v
SET verdict = b.verdict, level = b.level, reason = b.reason, findings = b.findings::JSON,
    config_findings = b.config_findings::JSON,
    since = b.since::TIMESTAMPTZ, judged_at = b.judged_at::TIMESTAMPTZ, samples = b.samples,
    delivered_per_second = b.delivered_per_second, acked_per_second = b.acked_per_second,
    redelivered_per_second = b.redelivered_per_second,
    eta_state = b.eta_state, eta_seconds = b.eta_seconds, eta_low_seconds = b.eta_low_seconds,
    eta_high_seconds = b.eta_high_seconds,
    last_pull = b.last_pull::TIMESTAMPTZ, last_ack = b.last_ack::TIMESTAMPTZ, first_seen = b.first_seen::TIMESTAMPTZ,
    calmer_since = b.calmer_since::TIMESTAMPTZ, unhealthy_since = b.unhealthy_since::TIMESTAMPTZ,
    pull_wait_last = b.pull_wait_last, pull_wait_prev = b.pull_wait_prev,
    pull_wait_ended = b.pull_wait_ended::TIMESTAMPTZ, pull_waits_in_row = b.pull_waits_in_row::INTEGER
FROM verdict_batch b
WHERE v.account = b.account AND v.stream = b.stream AND v.consumer = b.consumer;
INSERT INTO verdicts_current BY NAME
SELECT account, stream, consumer, verdict, level, reason, findings::JSON AS findings,
       config_findings::JSON AS config_findings,
       since::TIMESTAMPTZ AS since, judged_at::TIMESTAMPTZ AS judged_at, samples,
       delivered_per_second, acked_per_second, redelivered_per_second,
       eta_state, eta_seconds, eta_low_seconds, eta_high_seconds,
       last_pull::TIMESTAMPTZ AS last_pull, last_ack::TIMESTAMPTZ AS last_ack,
       first_seen::TIMESTAMPTZ AS first_seen, calmer_since::TIMESTAMPTZ AS calmer_since,
       unhealthy_since::TIMESTAMPTZ AS unhealthy_since,
       pull_wait_last, pull_wait_prev, pull_wait_ended::TIMESTAMPTZ AS pull_wait_ended,
       pull_waits_in_row::INTEGER AS pull_waits_in_row
FROM verdict_batch b
WHERE NOT EXISTS (
    SELECT 1 FROM verdicts_current v
    WHERE v.account = b.account AND v.stream = b.stream AND v.consumer = b.consumer
);
