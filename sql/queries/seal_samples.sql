-- The span's samples of the consumers numbered lo..hi-1 into samples_sealed, each consumer's rows
-- together, in time order (a pass moves its span in ranges of numbers, ascending, so that a sort
-- holds a part of the span in memory, not all of it).
INSERT INTO samples_sealed BY NAME
SELECT i.cid, s.* EXCLUDE (sampled_at, cycle)
FROM samples_recent AS s
JOIN consumer_ids AS i ON i.account = s.account AND i.stream = s.stream AND i.consumer = s.consumer
WHERE coalesce(s.sampled_at, s.ts) < $until AND s.cycle IS DISTINCT FROM (SELECT cycle FROM current_cycle)
  AND i.cid >= $lo AND i.cid < $hi
ORDER BY i.cid, s.ts
