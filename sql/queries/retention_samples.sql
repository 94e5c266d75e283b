-- Raw samples past retention go only where an hourly rollup COVERS them: per consumer and hour,
-- the rollup counted at least as many samples as the store holds before the cutoff. An hour the
-- pipeline never rolled up (it was down), or rolled up before more samples arrived, keeps its raw
-- samples however old, so a later run can still roll it up.
-- The rows not sealed yet (retention_sealed_samples.sql: the sealed ones; both count over the
-- view `samples`, so a consumer-hour split between the two tables is judged whole).
DELETE FROM samples_recent USING (
    SELECT s.account, s.stream, s.consumer, s.hour
    FROM (SELECT account, stream, consumer, date_trunc('hour', timezone('UTC', ts)) AS hour, count(*) AS n
          FROM samples WHERE ts < $cutoff GROUP BY ALL) AS s
    JOIN rollups AS r
      ON r.granularity = '1h' AND r.account = s.account AND r.stream = s.stream AND r.consumer = s.consumer
     AND timezone('UTC', r.bucket) = s.hour AND r.samples >= s.n
) AS covered
WHERE samples_recent.ts < $cutoff
  AND samples_recent.account = covered.account AND samples_recent.stream = covered.stream
  AND samples_recent.consumer = covered.consumer
  AND date_trunc('hour', timezone('UTC', samples_recent.ts)) = covered.hour;
