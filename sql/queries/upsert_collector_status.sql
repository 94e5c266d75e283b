INSERT OR REPLACE INTO collector_status BY NAME
SELECT $collector AS collector, $started_at AS started_at, $last_cycle_at AS last_cycle_at,
       $cycle_seconds AS cycle_seconds, $streams AS streams, $consumers AS consumers,
       $sample_mode AS sample_mode, $capture_mode AS capture_mode, $capture_pending AS capture_pending,
       $capture_caught_up AS capture_caught_up, $last_event_at AS last_event_at,
       $last_error AS last_error, $last_error_at AS last_error_at, $server_url AS server_url,
       $clock_offset_seconds AS clock_offset_seconds, $capture_warning AS capture_warning;
