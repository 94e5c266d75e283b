-- The verdict a silence would acknowledge: the consumer's current one, in every account that has
-- a consumer of that name when no account is given.
SELECT account, stream, consumer, verdict, level, since
FROM verdicts_current
WHERE stream = $stream AND consumer = $consumer AND ($account IS NULL OR account = $account);
