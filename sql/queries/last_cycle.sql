SELECT max(last_cycle_at) AS last_cycle_at FROM collector_status;
