-- Raw samples past retention go only where an hourly rollup COVERS them: per consumer and hour,
-- the rollup counted at least as many samples as the store holds before the cutoff. An hour the
-- pipeline never rolled up (it was down), or rolled up before more samples arrived, keeps its raw
-- samples however old, so a later run can still roll it up.
DELETE FROM samples USING (
    SELECT s.account, s.stream, s.consumer, s.hour
    FROM (SELECT account, stream, consumer, date_trunc('hour', timezone('UTC', ts)) AS hour, count(*) AS n
          FROM samples WHERE ts < $cutoff GROUP BY ALL) AS s
    JOIN rollups AS r
      ON r.granularity = '1h' AND r.account = s.account AND r.stream = s.stream AND r.consumer = s.consumer
     AND timezone('UTC', r.bucket) = s.hour AND r.samples >= s.n
) AS covered
WHERE samples.ts < $cutoff
  AND samples.account = covered.account AND samples.stream = covered.stream
  AND samples.consumer = covered.consumer
  AND date_trunc('hour', timezone('UTC', samples.ts)) = covered.hour;
