INSERT OR REPLACE INTO collector_status VALUES (
    $collector, $started_at, $last_cycle_at, $cycle_seconds, $streams, $consumers, $sample_mode,
    $capture_mode, $capture_pending, $capture_caught_up, $last_event_at, $last_error,
    $last_error_at, $server_url);
