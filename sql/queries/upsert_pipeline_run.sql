INSERT OR REPLACE INTO pipeline_runs VALUES ($run_id, $started_at, $finished_at, $since, $until, $outcome,
                                             $rows_in, $message);
