-- The verdicts the collector kept, to find this cycle's transitions, to hold a last known
-- verdict when too few fresh samples remain to judge again (after the collector was away), to
-- write only what changed, and each consumer's last activity and waits for a pull.
SELECT account, stream, consumer, verdict, since, reason, findings::VARCHAR AS findings,
       coalesce(config_findings::VARCHAR, '[]') AS config_findings, judged_at,
       samples, delivered_per_second, acked_per_second, redelivered_per_second,
       eta_state, eta_seconds, eta_low_seconds, eta_high_seconds, last_pull, last_ack, first_seen,
       calmer_since, unhealthy_since, pull_wait_last, pull_wait_prev, pull_wait_ended, pull_waits_in_row
FROM verdicts_current;
