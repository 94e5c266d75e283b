-- Pin sessions from pin events: the one definition every page reads (the pipeline's Spark job
-- follows the same rules; tests/test_pipeline.py holds the two together on generated histories).
-- Over the relation `session_events` (ts, account, stream, consumer, group_name, event, pinned_id,
-- reason, source): the live tail (stage_pin_tail) or any frame of events (health/sessions.py).
-- Duplicates are dropped and order is by time. A pin ends at its consumer's next event: an unpin
-- (its reason, or 'inferred' when no advisory said), another pin with no unpin seen ('inferred'),
-- the consumer's deletion ('consumer deleted'), or nothing yet ('still pinned', ongoing: ending at
-- getvariable('sessions_until'), now). An unpin with no pin before it is a session with an unknown
-- start, so the unpin still counts. At one instant a deletion comes first, then an unpin, then a pin.
-- Kept as a temp table (a tail is small): the page's queries read it several times.
CREATE OR REPLACE TEMP TABLE pin_sessions_live AS
WITH ev AS MATERIALIZED (
    SELECT ts, account, stream, consumer, any_value(group_name) AS group_name, event, pinned_id, reason, source
    FROM session_events
    GROUP BY ts, account, stream, consumer, event, pinned_id, reason, source
),
ordered AS MATERIALIZED (
    SELECT *, lag(event) OVER w AS prev_event, lead(event) OVER w AS next_event, lead(ts) OVER w AS next_ts,
           lead(reason) OVER w AS next_reason, lead(source) OVER w AS next_source
    FROM ev
    WINDOW w AS (PARTITION BY account, stream, consumer
                 ORDER BY ts, CASE event WHEN 'deleted' THEN 0 WHEN 'unpinned' THEN 1 ELSE 2 END,
                          pinned_id NULLS FIRST, source NULLS FIRST, reason NULLS FIRST)
),
sessions AS MATERIALIZED (
    SELECT account, stream, consumer, group_name, pinned_id, ts AS start_ts,
           coalesce(next_ts, getvariable('sessions_until')::TIMESTAMPTZ) AS end_ts,
           CASE WHEN next_event IS NULL THEN 'still pinned'
                WHEN next_event = 'deleted' THEN 'consumer deleted'
                WHEN next_event = 'unpinned' AND next_source = 'inferred' THEN 'inferred'
                WHEN next_event = 'unpinned' THEN coalesce(next_reason, 'unknown')
                ELSE 'inferred' END AS end_reason
    FROM ordered WHERE event = 'pinned'
    UNION ALL
    SELECT account, stream, consumer, group_name, NULL AS pinned_id, NULL::TIMESTAMPTZ AS start_ts, ts AS end_ts,
           CASE WHEN source = 'inferred' THEN 'inferred' ELSE coalesce(reason, 'unknown') END AS end_reason
    FROM ordered WHERE event = 'unpinned' AND (prev_event IS NULL OR prev_event <> 'pinned')
)
SELECT account, stream, consumer, group_name, pinned_id, start_ts, end_ts,
       epoch(end_ts) - epoch(start_ts) AS duration_seconds, end_reason,
       CASE WHEN lead(start_ts) OVER next_pin IS NOT NULL
            THEN greatest(epoch(lead(start_ts) OVER next_pin) - epoch(end_ts), 0) END AS gap_seconds
FROM sessions
WINDOW next_pin AS (PARTITION BY account, stream, consumer
                    ORDER BY end_ts, start_ts NULLS FIRST, end_reason, pinned_id NULLS FIRST);
