-- Raw samples past retention go only where an hourly rollup COVERS them: per consumer and hour,
-- the rollup counted at least as many samples as the store holds before the cutoff (the view
-- `samples`: sealed and unsealed, so a consumer-hour split between the two is judged whole). An
-- hour the pipeline never rolled up (it was down), or rolled up before more samples arrived, keeps
-- its raw samples however old, so a later run can still roll it up. retention_samples.sql and
-- retention_sealed_samples.sql delete what this finds.
CREATE OR REPLACE TEMP TABLE covered_hours AS
SELECT s.account, s.stream, s.consumer, s.hour
FROM (SELECT account, stream, consumer, date_trunc('hour', timezone('UTC', ts)) AS hour, count(*) AS n
      FROM samples WHERE ts < $cutoff GROUP BY ALL) AS s
JOIN rollups AS r
  ON r.granularity = '1h' AND r.account = s.account AND r.stream = s.stream AND r.consumer = s.consumer
 AND timezone('UTC', r.bucket) = s.hour AND r.samples >= s.n
