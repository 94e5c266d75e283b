-- The consumer a forget would drop: its current verdict and reason, in every account that has a
-- consumer of that name when no account is given.
SELECT account, stream, consumer, verdict, reason
FROM verdicts_current
WHERE stream = $stream AND consumer = $consumer AND ($account IS NULL OR account = $account);
