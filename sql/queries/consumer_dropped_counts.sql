-- One consumer's dropped messages counted by advisory kind and reason (health/drops.py tells the
-- causes apart), with the oldest retained: every one of them, not only the rows a page lists.
SELECT dropped_by, reason, count(*) AS dropped, min(ts) AS oldest
FROM dropped_messages
WHERE account = $account AND stream = $stream AND consumer = $consumer
GROUP BY ALL;
