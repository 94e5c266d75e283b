-- How many pin events and sessions the range holds in all (the page shows the newest), and where the
-- pipeline's last run ended (set_pin_range): sessions before it are the pipeline's.
WITH r AS (SELECT unnest(getvariable('pin_range')))
SELECT (SELECT count(*) FROM pin_events e, r WHERE e.ts >= r.since AND e.ts <= r.until) AS events,
       (SELECT count(*) FROM pin_sessions_in_range WHERE start_ts IS NOT NULL) AS sessions,
       (SELECT run_until FROM r) AS run_until;
