-- Where the last successful pipeline run ended: a later run starts there at the latest.
SELECT max(until_ts) AS until_ts FROM pipeline_runs WHERE outcome = 'ok';
