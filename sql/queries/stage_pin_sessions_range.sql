-- The pin sessions overlapping the range (set_pin_range), up to now: what the pipeline rolled up and
-- closed by the cut, then the live tail's sessions (stage_pin_tail, stage_pin_sessions), which end
-- where the events say (an ongoing pin at now). The gap after each pin is taken again over both, so
-- a pin the pipeline closed has its gap to the next pin even when that pin came after the run.
-- `ongoing`: nothing has ended the pin yet (its duration is so far). Kept as the temp table
-- pin_sessions_in_range, which the page's summary (pin_summary_range) and its rows (pin_sessions_rows) read.
CREATE OR REPLACE TEMP TABLE pin_sessions_in_range AS
WITH r AS (SELECT unnest(getvariable('pin_range'))),
rolled AS (
    SELECT s.account, s.stream, s.consumer, s.group_name, s.pinned_id, s.start_ts, s.end_ts, s.end_reason
    FROM pin_sessions s, r
    WHERE r.run_until IS NOT NULL AND s.end_reason <> 'still pinned' AND s.end_ts <= r.cut AND s.end_ts >= r.since
      AND (r.consumer IS NULL OR ((r.account IS NULL OR s.account = r.account) AND s.stream = r.stream
                                  AND s.consumer = r.consumer))
),
both_parts AS (
    SELECT * FROM rolled
    UNION ALL
    SELECT account, stream, consumer, group_name, pinned_id, start_ts, end_ts, end_reason FROM pin_sessions_live
)
SELECT account, stream, consumer, group_name, pinned_id, start_ts, end_ts,
       epoch(end_ts) - epoch(start_ts) AS duration_seconds, end_reason,
       CASE WHEN lead(start_ts) OVER next_pin IS NOT NULL
            THEN greatest(epoch(lead(start_ts) OVER next_pin) - epoch(end_ts), 0) END AS gap_seconds,
       end_reason = 'still pinned' AS ongoing
FROM both_parts
WINDOW next_pin AS (PARTITION BY account, stream, consumer
                    ORDER BY end_ts, start_ts NULLS FIRST, end_reason, pinned_id NULLS FIRST)
ORDER BY account, stream, consumer, end_ts;
