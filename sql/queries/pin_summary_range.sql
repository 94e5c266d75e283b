-- Per consumer over the range (set_pin_range, stage_pin_sessions_range): its pins in the range
-- (switches), where its pin data in the range starts, the most pins that started within any one
-- health window of the range (history; whether it flaps is the Fleet's verdict, `flapping` here:
-- the collector's last judgement, over the last health window), and how long its pins lasted
-- (median, p95) with the ongoing pin counted at its duration so far (`ongoing_pin_seconds`); the
-- reasons its pins were ended for in the range ('inferred': seen in samples).
WITH r AS (SELECT unnest(getvariable('pin_range'))),
pins AS (
    SELECT e.account, e.stream, e.consumer, e.ts,
           count(*) OVER (PARTITION BY e.account, e.stream, e.consumer ORDER BY e.ts
                          RANGE BETWEEN to_microseconds((getvariable('pin_range').health_window_seconds * 1e6)::BIGINT)
                          PRECEDING AND CURRENT ROW) AS in_window
    FROM pin_events e, r
    WHERE e.event = 'pinned' AND e.ts >= r.since AND e.ts <= r.until
      AND (r.consumer IS NULL OR ((r.account IS NULL OR e.account = r.account) AND e.stream = r.stream
                                  AND e.consumer = r.consumer))
),
switches AS (
    SELECT account, stream, consumer, count(*) AS switches, max(in_window) AS most_in_a_window, min(ts) AS first_ts
    FROM pins GROUP BY ALL
),
reasons AS (
    SELECT e.account, e.stream, e.consumer,
           list(DISTINCT CASE WHEN e.source = 'inferred' THEN 'inferred' ELSE coalesce(e.reason, 'unknown') END) AS unpin_reasons
    FROM pin_events e, r
    WHERE e.event = 'unpinned' AND e.ts >= r.since AND e.ts <= r.until
      AND (r.consumer IS NULL OR ((r.account IS NULL OR e.account = r.account) AND e.stream = r.stream
                                  AND e.consumer = r.consumer))
    GROUP BY ALL
),
lengths AS (
    SELECT account, stream, consumer, min(start_ts) AS first_start,
           median(duration_seconds) AS median_pin_seconds, quantile_cont(duration_seconds, 0.95) AS p95_pin_seconds,
           max(duration_seconds) FILTER (WHERE ongoing) AS ongoing_pin_seconds
    FROM pin_sessions_in_range WHERE start_ts IS NOT NULL
    GROUP BY ALL
),
flapping AS (
    SELECT account, stream, consumer, judged_at
    FROM verdicts_current
    WHERE verdict = 'FLAPPING' OR list_contains(json_extract_string(findings, '$[*].verdict'), 'FLAPPING')
)
SELECT coalesce(s.account, l.account) AS account, coalesce(s.stream, l.stream) AS stream,
       coalesce(s.consumer, l.consumer) AS consumer, coalesce(s.switches, 0) AS switches,
       coalesce(s.most_in_a_window, 0) AS most_in_a_window, least(s.first_ts, l.first_start) AS first_ts,
       l.median_pin_seconds, l.p95_pin_seconds, l.ongoing_pin_seconds,
       f.judged_at IS NOT NULL AS flapping, coalesce(u.unpin_reasons, []) AS unpin_reasons
FROM switches s
FULL JOIN lengths l ON l.account = s.account AND l.stream = s.stream AND l.consumer = s.consumer
LEFT JOIN flapping f ON f.account = coalesce(s.account, l.account) AND f.stream = coalesce(s.stream, l.stream)
                    AND f.consumer = coalesce(s.consumer, l.consumer)
LEFT JOIN reasons u ON u.account = coalesce(s.account, l.account) AND u.stream = coalesce(s.stream, l.stream)
                   AND u.consumer = coalesce(s.consumer, l.consumer);
