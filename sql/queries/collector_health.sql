SELECT collector, started_at, last_cycle_at, cycle_seconds, streams, consumers, sample_mode,
       capture_mode, capture_pending, capture_caught_up, last_event_at, last_error, last_error_at,
       server_url, clock_offset_seconds, capture_warning,
       (SELECT count(*) FROM rejects) AS rejects_total,
       (SELECT max(ts) FROM rejects) AS last_reject_at
FROM collector_status
ORDER BY last_cycle_at DESC NULLS LAST;
