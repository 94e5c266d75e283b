-- The span's samples into samples_sealed, each consumer's rows together, in time order.
INSERT INTO samples_sealed BY NAME
SELECT i.cid, s.*
FROM samples_recent AS s
JOIN consumer_ids AS i ON i.account = s.account AND i.stream = s.stream AND i.consumer = s.consumer
WHERE s.ts < $until
ORDER BY i.cid, s.ts
