-- The cluster this store belongs to (no row: no collector has claimed it yet) and the server its
-- collector last reported (without credentials), where actions on its consumers go by default.
SELECT (SELECT value FROM store_meta WHERE key = 'cluster') AS cluster,
       (SELECT server_url FROM collector_status WHERE server_url IS NOT NULL
        ORDER BY last_cycle_at DESC NULLS LAST LIMIT 1) AS server_url;
