-- Where to cut a pass into parts of about equal size: quantiles of the numbers of the consumers in
-- its span (each is sampled about as often as the others), not of every number ever given, which
-- consumers long gone would skew.
SELECT quantile_disc(i.cid, $fractions)
FROM (SELECT DISTINCT account, stream, consumer FROM samples_recent WHERE coalesce(sampled_at, ts) < $until AND cycle IS DISTINCT FROM (SELECT cycle FROM current_cycle)) AS n
JOIN consumer_ids AS i ON i.account = n.account AND i.stream = n.stream AND i.consumer = n.consumer;
