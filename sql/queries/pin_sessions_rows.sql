-- The pin sessions overlapping the range, up to now, newest end first, at most $limit, of the
-- consumers shown (stage_pin_rows_all or stage_pin_rows_chosen): the pipeline's (pin_sessions_rolled),
-- then the live tail's (pin_sessions_live), which end where the events say (an ongoing pin at now;
-- `ongoing`: nothing has ended it yet, its duration is so far). The pipeline's last session of a
-- consumer, when the pipeline saw nothing after it (its gap NULL), gets its gap to the tail's first
-- session, as if both were sessionised at once. Each with its holder as its worker announced it
-- (`holder_name`, `holder_verification`: NULL where no worker did), as on the Consumer page.
-- `rolled` is read twice below: materialized, the pipeline's sessions are scanned once.
WITH rolled AS MATERIALIZED (SELECT * FROM pin_rolled_shown ORDER BY end_ts DESC LIMIT $limit),
tail_first AS (
    SELECT account, stream, consumer,
           first(start_ts ORDER BY end_ts, start_ts NULLS FIRST, end_reason, pinned_id NULLS FIRST) AS first_start
    FROM pin_sessions_live GROUP BY ALL
),
-- the newest rolled rows of a consumer come first in `rolled`: its last one is among them when any is
rolled_last AS (SELECT account, stream, consumer, max(end_ts) AS last_end FROM rolled GROUP BY ALL)
SELECT s.*, h.name AS holder_name, h.verification AS holder_verification FROM (
    SELECT d.account, d.stream, d.consumer, d.group_name, d.pinned_id, d.start_ts, d.end_ts, d.duration_seconds,
           d.end_reason,
           CASE WHEN d.gap_seconds IS NULL AND d.end_ts = l.last_end AND t.first_start IS NOT NULL
                THEN greatest(epoch(t.first_start) - epoch(d.end_ts), 0) ELSE d.gap_seconds END AS gap_seconds,
           false AS ongoing
    FROM rolled d
    JOIN rolled_last l USING (account, stream, consumer)
    LEFT JOIN tail_first t USING (account, stream, consumer)
    UNION ALL
    SELECT account, stream, consumer, group_name, pinned_id, start_ts, end_ts, duration_seconds, end_reason,
           gap_seconds, end_reason = 'still pinned' AS ongoing
    FROM pin_live_shown
) s
LEFT JOIN pin_holders h ON h.pin_id = s.pinned_id AND h.account IS NOT DISTINCT FROM s.account AND h.stream = s.stream
          AND h.consumer = s.consumer
ORDER BY s.end_ts DESC, s.start_ts DESC NULLS LAST, s.account, s.stream, s.consumer
LIMIT $limit;
