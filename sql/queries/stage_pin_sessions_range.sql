-- The pipeline's part of the range's pin sessions (set_pin_range), as the temp view
-- pin_sessions_rolled that pin_sessions_rows, pin_summary_range and pin_range_run read beside the
-- live tail's sessions (pin_sessions_live): what the pipeline rolled up and closed by the cut. A pin
-- the pipeline saw still held, or closed after the cut, is the tail's. (The range is read with
-- getvariable in the filters themselves, so they reach the table's scan.)
CREATE OR REPLACE TEMP VIEW pin_sessions_rolled AS
SELECT s.account, s.stream, s.consumer, s.group_name, s.pinned_id, s.start_ts, s.end_ts, s.duration_seconds,
       s.end_reason, s.gap_seconds
FROM pin_sessions s
WHERE getvariable('pin_range').run_until IS NOT NULL AND s.end_reason <> 'still pinned'
  AND s.end_ts <= getvariable('pin_range').cut AND s.end_ts >= getvariable('pin_range').since
  AND (getvariable('pin_range').consumer IS NULL
       OR ((getvariable('pin_range').account IS NULL OR s.account = getvariable('pin_range').account)
           AND s.stream = getvariable('pin_range').stream AND s.consumer = getvariable('pin_range').consumer));
