-- Raw samples past retention go, but only those an hourly rollup already covers.
DELETE FROM samples
WHERE ts < $cutoff
  AND ts < (SELECT coalesce(max(bucket), TIMESTAMPTZ '1970-01-01') FROM rollups WHERE granularity = '1h');
