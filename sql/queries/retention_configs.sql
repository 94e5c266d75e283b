-- Old configuration changes go; each consumer's latest configuration stays however old.
DELETE FROM consumer_configs
WHERE ts < $cutoff
  AND (account, stream, consumer, ts) NOT IN (
      SELECT (account, stream, consumer, max(ts)) FROM consumer_configs GROUP BY account, stream, consumer);
