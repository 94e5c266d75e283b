-- Every gap in the advisory record: the pipeline marks the pin sessions that overlap one.
SELECT from_ts, to_ts, detected_at FROM capture_gaps;
