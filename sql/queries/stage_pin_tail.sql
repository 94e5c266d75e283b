-- The live tail of pin history, as the relation `session_events` that stage_pin_sessions
-- sessionises: every pin event after the cut (set_pin_range), and per consumer the pin open at the
-- cut (its last event at or before it, when that is a pin) so the pin held across the cut ends where
-- the events say, not where the pipeline's run did. The pin open at the cut is the last of the events
-- after the pipeline's run and the pins its sessions left open then: history before the run is never
-- scanned (without a run, it is).
CREATE OR REPLACE TEMP VIEW session_events AS
WITH r AS (SELECT unnest(getvariable('pin_range'))),
mine AS (
    SELECT e.ts, e.account, e.stream, e.consumer, e.group_name, e.event, e.pinned_id, e.reason, e.source
    FROM pin_session_events e, r
    WHERE (r.consumer IS NULL OR ((r.account IS NULL OR e.account = r.account) AND e.stream = r.stream
                                  AND e.consumer = r.consumer))
      AND e.ts > coalesce(r.run_until, '-infinity'::TIMESTAMPTZ)
      AND e.ts <= r.until
),
open_at_cut AS (
    SELECT s.start_ts AS ts, s.account, s.stream, s.consumer, s.group_name, 'pinned' AS event, s.pinned_id,
           NULL AS reason, 'advisory' AS source
    FROM pin_sessions s, r
    WHERE r.run_until IS NOT NULL AND s.start_ts <= r.cut AND (s.end_ts > r.cut OR s.end_reason = 'still pinned')
      AND (r.consumer IS NULL OR ((r.account IS NULL OR s.account = r.account) AND s.stream = r.stream
                                  AND s.consumer = r.consumer))
),
before_cut AS (
    SELECT mine.* FROM mine, r WHERE mine.ts <= r.cut
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
SELECT mine.* FROM mine, r WHERE mine.ts > r.cut;
