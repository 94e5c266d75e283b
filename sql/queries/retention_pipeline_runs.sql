DELETE FROM pipeline_runs WHERE started_at < $cutoff;
