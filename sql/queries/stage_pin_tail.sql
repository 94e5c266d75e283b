-- The live tail of pin history, as the relation `session_events` that stage_pin_sessions
-- sessionises: every pin event at or after the cut (set_pin_range), and per consumer the pin open
-- at the cut (its last event before it, when that is a pin) so the pin held across the cut ends where
-- the events say, not where the pipeline's run did (a pin that ends at the cut itself is one the
-- range shows: an event at the cut is the tail's, whole). The pin open at the cut is the last of the events
-- after the pipeline's run and the pins its sessions left open then: history before the run is never
-- scanned (without a run, it is). The range is read with getvariable in the filters themselves, so
-- they reach the tables' scans.
CREATE OR REPLACE TEMP VIEW session_events AS
WITH mine AS (
    SELECT e.ts, e.account, e.stream, e.consumer, e.group_name, e.event, e.pinned_id, e.reason, e.source
    FROM pin_session_events e
    WHERE (getvariable('pin_range').consumer IS NULL OR ((getvariable('pin_range').account IS NULL OR e.account = getvariable('pin_range').account) AND e.stream = getvariable('pin_range').stream
                                  AND e.consumer = getvariable('pin_range').consumer))
      AND e.ts > coalesce(getvariable('pin_range').run_until, '-infinity'::TIMESTAMPTZ)
      AND e.ts <= getvariable('pin_range').until
),
-- A pin open at the cut ended after it, or the pipeline saw it still held: two filters, not one OR of
-- them, so each reaches the scan of pin_sessions and its other columns are read for those rows only.
open_at_cut AS (
    SELECT s.start_ts AS ts, s.account, s.stream, s.consumer, s.group_name, 'pinned' AS event, s.pinned_id,
           NULL AS reason, 'advisory' AS source
    FROM pin_sessions s
    WHERE getvariable('pin_range').run_until IS NOT NULL AND s.start_ts <= getvariable('pin_range').cut
      AND s.end_ts > getvariable('pin_range').cut
      AND (getvariable('pin_range').consumer IS NULL OR ((getvariable('pin_range').account IS NULL OR s.account = getvariable('pin_range').account) AND s.stream = getvariable('pin_range').stream
                                  AND s.consumer = getvariable('pin_range').consumer))
    UNION ALL
    SELECT s.start_ts AS ts, s.account, s.stream, s.consumer, s.group_name, 'pinned' AS event, s.pinned_id,
           NULL AS reason, 'advisory' AS source
    FROM pin_sessions s
    WHERE getvariable('pin_range').run_until IS NOT NULL AND s.start_ts <= getvariable('pin_range').cut
      AND s.end_reason = 'still pinned' AND (s.end_ts <= getvariable('pin_range').cut OR s.end_ts IS NULL)
      AND (getvariable('pin_range').consumer IS NULL OR ((getvariable('pin_range').account IS NULL OR s.account = getvariable('pin_range').account) AND s.stream = getvariable('pin_range').stream
                                  AND s.consumer = getvariable('pin_range').consumer))
),
before_cut AS (
    SELECT mine.* FROM mine WHERE mine.ts < getvariable('pin_range').cut
    UNION ALL
    SELECT * FROM open_at_cut
)
SELECT ts, account, stream, consumer, group_name, event, pinned_id, reason, source
FROM before_cut
QUALIFY row_number() OVER (PARTITION BY account, stream, consumer
                           ORDER BY ts DESC, CASE event WHEN 'deleted' THEN 0 WHEN 'unpinned' THEN 1 ELSE 2 END DESC,
                                    pinned_id DESC NULLS LAST, source DESC NULLS LAST, reason DESC NULLS LAST) = 1
    AND event = 'pinned'
UNION ALL
SELECT mine.* FROM mine WHERE mine.ts >= getvariable('pin_range').cut;
