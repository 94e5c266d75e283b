-- The kept verdicts whose words stayed and whose numbers or activity moved (the registered Arrow
-- table `verdict_numbers`: the key, the numbers, the activity and the waits for a pull): only those are written.
-- Returns the count of rows updated: the caller writes the whole rows instead when one was missing.
UPDATE verdicts_current v
SET samples = b.samples, delivered_per_second = b.delivered_per_second, acked_per_second = b.acked_per_second,
    redelivered_per_second = b.redelivered_per_second, eta_seconds = b.eta_seconds,
    eta_low_seconds = b.eta_low_seconds, eta_high_seconds = b.eta_high_seconds,
    last_pull = b.last_pull::TIMESTAMPTZ, last_ack = b.last_ack::TIMESTAMPTZ, first_seen = b.first_seen::TIMESTAMPTZ,
    pull_wait_last = b.pull_wait_last, pull_wait_prev = b.pull_wait_prev,
    pull_wait_ended = b.pull_wait_ended::TIMESTAMPTZ, pull_waits_in_row = b.pull_waits_in_row::INTEGER
FROM verdict_numbers b
WHERE v.account = b.account AND v.stream = b.stream AND v.consumer = b.consumer;
