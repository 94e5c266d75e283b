-- Numbers for the consumers sealed for the first time, after the highest given so far.
INSERT INTO consumer_ids
SELECT n.account, n.stream, n.consumer,
       (SELECT coalesce(max(cid) + 1, 0) FROM consumer_ids) + row_number() OVER (ORDER BY n.stream, n.consumer, n.account) - 1
FROM (SELECT DISTINCT account, stream, consumer FROM samples_recent WHERE coalesce(sampled_at, ts) < $until AND cycle IS DISTINCT FROM (SELECT cycle FROM current_cycle)) AS n
ANTI JOIN consumer_ids AS i ON i.account = n.account AND i.stream = n.stream AND i.consumer = n.consumer
