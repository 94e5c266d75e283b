-- retention_samples.sql's rule for the sealed rows.
DELETE FROM samples_sealed USING (
    SELECT s.account, s.stream, s.consumer, s.hour
    FROM (SELECT account, stream, consumer, date_trunc('hour', timezone('UTC', ts)) AS hour, count(*) AS n
          FROM samples WHERE ts < $cutoff GROUP BY ALL) AS s
    JOIN rollups AS r
      ON r.granularity = '1h' AND r.account = s.account AND r.stream = s.stream AND r.consumer = s.consumer
     AND timezone('UTC', r.bucket) = s.hour AND r.samples >= s.n
) AS covered
WHERE samples_sealed.ts < $cutoff
  AND samples_sealed.account = covered.account AND samples_sealed.stream = covered.stream
  AND samples_sealed.consumer = covered.consumer
  AND date_trunc('hour', timezone('UTC', samples_sealed.ts)) = covered.hour;
