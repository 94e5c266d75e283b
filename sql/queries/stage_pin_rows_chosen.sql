-- The sessions pin_sessions_rows lists, of the consumers the viewer chose (set_pin_range): with a
-- search (NULL: any), those whose stream or consumer name holds it (any case); with reasons (empty:
-- any), those with a pin ended in the range for one of them (a session's end reason; 'inferred':
-- seen in samples).
CREATE OR REPLACE TEMP TABLE pin_chosen AS
WITH r AS (SELECT unnest(getvariable('pin_range'))),
named AS (
    SELECT DISTINCT account, stream, consumer FROM pin_sessions_rolled
    UNION SELECT DISTINCT account, stream, consumer FROM pin_sessions_live
)
SELECT n.* FROM named n, r
WHERE (r.search IS NULL OR contains(lower(n.stream), lower(r.search))
       OR contains(lower(n.consumer), lower(r.search)))
  AND (len(r.reasons) = 0 OR EXISTS (
        SELECT 1 FROM (SELECT account, stream, consumer, end_ts, end_reason FROM pin_sessions_rolled
                       UNION ALL SELECT account, stream, consumer, end_ts, end_reason FROM pin_sessions_live) e
        WHERE e.account = n.account AND e.stream = n.stream AND e.consumer = n.consumer
          AND e.end_ts >= r.since AND list_contains(r.reasons, e.end_reason)));
CREATE OR REPLACE TEMP VIEW pin_rolled_shown AS SELECT * FROM pin_sessions_rolled SEMI JOIN pin_chosen USING (account, stream, consumer);
CREATE OR REPLACE TEMP VIEW pin_live_shown AS SELECT * FROM pin_sessions_live SEMI JOIN pin_chosen USING (account, stream, consumer);
