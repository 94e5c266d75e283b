-- Per consumer over the range (set_pin_range): its pins in the range (switches), where its pin data
-- in the range starts, the most pins that started within one health window of the clock (windows
-- from the epoch, as verdicts are bucketed; history: whether it flaps is the Fleet's verdict,
-- `flapping` here, the collector's last judgement over the last health window), how long its pins
-- lasted (median, p95: the pipeline's sessions, then the live tail's, the ongoing pin counted at its
-- duration so far, `ongoing_pin_seconds`), and the reasons its pins were ended for in the range
-- ('inferred': seen in samples); how many pin events and sessions (with a known start) it had in the range.
WITH r AS (SELECT unnest(getvariable('pin_range'))),
ev AS MATERIALIZED (
    SELECT e.account, e.stream, e.consumer, e.ts, e.event,
           CASE WHEN e.source = 'inferred' THEN 'inferred' ELSE coalesce(e.reason, 'unknown') END AS why
    FROM pin_events e, r
    WHERE e.ts >= r.since AND e.ts <= r.until
      AND (r.consumer IS NULL OR ((r.account IS NULL OR e.account = r.account) AND e.stream = r.stream
                                  AND e.consumer = r.consumer))
),
windows AS (
    SELECT account, stream, consumer, count(*) AS pins
    FROM ev WHERE event = 'pinned'
    GROUP BY account, stream, consumer, floor(epoch(ts) / getvariable('pin_range').health_window_seconds)
),
switches AS (
    SELECT account, stream, consumer, count(*) FILTER (WHERE event = 'pinned') AS switches, min(ts) AS first_ts,
           count(*) FILTER (WHERE event <> 'deleted') AS events,
           list(DISTINCT why) FILTER (WHERE event = 'unpinned') AS unpin_reasons
    FROM ev GROUP BY ALL
),
most AS (SELECT account, stream, consumer, max(pins) AS most_in_a_window FROM windows GROUP BY ALL),
lengths AS (
    SELECT account, stream, consumer, min(start_ts) AS first_start, count(*) AS sessions,
           median(duration_seconds) AS median_pin_seconds, quantile_cont(duration_seconds, 0.95) AS p95_pin_seconds,
           max(duration_seconds) FILTER (WHERE end_reason = 'still pinned') AS ongoing_pin_seconds
    FROM (SELECT account, stream, consumer, start_ts, duration_seconds, end_reason FROM pin_sessions_rolled
          UNION ALL
          SELECT account, stream, consumer, start_ts, duration_seconds, end_reason FROM pin_sessions_live)
    WHERE start_ts IS NOT NULL
    GROUP BY ALL
),
flapping AS (
    SELECT account, stream, consumer, judged_at
    FROM verdicts_current
    WHERE verdict = 'FLAPPING'
       OR (findings::VARCHAR LIKE '%FLAPPING%' AND list_contains(json_extract_string(findings, '$[*].verdict'), 'FLAPPING'))
)
SELECT coalesce(s.account, l.account) AS account, coalesce(s.stream, l.stream) AS stream,
       coalesce(s.consumer, l.consumer) AS consumer, coalesce(s.switches, 0) AS switches,
       coalesce(m.most_in_a_window, 0) AS most_in_a_window, least(s.first_ts, l.first_start) AS first_ts,
       l.median_pin_seconds, l.p95_pin_seconds, l.ongoing_pin_seconds,
       f.judged_at IS NOT NULL AS flapping, coalesce(s.unpin_reasons, []) AS unpin_reasons,
       coalesce(s.events, 0) AS events, coalesce(l.sessions, 0) AS sessions
FROM switches s
FULL JOIN lengths l ON l.account = s.account AND l.stream = s.stream AND l.consumer = s.consumer
LEFT JOIN most m ON m.account = s.account AND m.stream = s.stream AND m.consumer = s.consumer
LEFT JOIN flapping f ON f.account = coalesce(s.account, l.account) AND f.stream = coalesce(s.stream, l.stream)
                    AND f.consumer = coalesce(s.consumer, l.consumer);
