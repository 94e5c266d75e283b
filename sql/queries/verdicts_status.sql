-- The fleet's verdicts for `jetwatch status` and `jetwatch check`, with each consumer's time lag.
SELECT v.account, v.stream, v.consumer, v.verdict, v.level, v.reason, v.since, v.judged_at, v.findings,
       c.oldest_unacked_age_seconds, c.oldest_unacked_age_kind, c.oldest_undelivered_age_seconds,
       c.oldest_undelivered_age_kind, c.time_to_loss_seconds, v.eta_state, v.eta_seconds, v.eta_low_seconds, v.eta_high_seconds
FROM verdicts_current v
LEFT JOIN consumer_current c USING (account, stream, consumer)
ORDER BY v.account, v.stream, v.consumer;
