SELECT run_id, started_at, finished_at, since_ts, until_ts, outcome, rows_in, message
FROM pipeline_runs ORDER BY started_at DESC LIMIT 1;
