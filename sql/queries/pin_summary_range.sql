-- Per consumer over the range (set_pin_range), from its pin sessions (the pipeline's, pin_sessions_rolled,
-- then the live tail's, pin_sessions_live; no pass over every pin event of a long range): its pins that
-- started in the range (switches) and how many sessions it had, where its pin data in the range
-- starts, the most pins that started within one health window of the clock (windows from the epoch;
-- history: whether it flaps is the Fleet's verdict, `flapping` here, the collector's last judgement
-- over the last health window), how long its pins lasted (median, p95, the ongoing pin counted at its
-- duration so far, `ongoing_pin_seconds`), and why its pins ended in the range (`unpin_reasons`:
-- timeout, admin, unknown, or 'inferred' when samples showed it).
WITH r AS (SELECT unnest(getvariable('pin_range'))),
-- Not materialized: each reference below reads only the columns it needs from the tables, where a copy
-- of every session of a long range (its names included) cost more than the three scans.
sessions AS NOT MATERIALIZED (
    SELECT account, stream, consumer, start_ts, end_ts, duration_seconds, end_reason FROM pin_sessions_rolled
    UNION ALL
    SELECT account, stream, consumer, start_ts, end_ts, duration_seconds, end_reason FROM pin_sessions_live
),
-- Two pins start in one window only when the first lasted less than a window (a pin ends at the next
-- event): the windows are counted for the consumers with such a pin only; the others had one at most.
bursty AS (
    SELECT DISTINCT s.account, s.stream, s.consumer FROM sessions s, r
    WHERE s.start_ts >= r.since AND s.duration_seconds < r.health_window_seconds
),
windows AS (
    SELECT s.account, s.stream, s.consumer, count(*) AS pins
    FROM sessions s SEMI JOIN bursty USING (account, stream, consumer), r
    WHERE s.start_ts >= r.since
    GROUP BY s.account, s.stream, s.consumer, floor(epoch(s.start_ts) / r.health_window_seconds)
),
most AS (SELECT account, stream, consumer, max(pins) AS most_in_a_window FROM windows GROUP BY ALL),
lengths AS (
    SELECT s.account, s.stream, s.consumer, count(*) FILTER (WHERE s.start_ts >= r.since) AS switches,
           count(s.start_ts) AS sessions, min(s.start_ts) AS first_ts,
           median(s.duration_seconds) AS median_pin_seconds,
           quantile_cont(s.duration_seconds, 0.95) AS p95_pin_seconds,
           max(s.duration_seconds) FILTER (WHERE s.end_reason = 'still pinned') AS ongoing_pin_seconds,
           list(DISTINCT s.end_reason) FILTER (WHERE s.end_reason NOT IN ('still pinned', 'consumer deleted')
                                               AND s.end_ts >= r.since) AS unpin_reasons
    FROM sessions s, r
    GROUP BY ALL
),
flapping AS (
    SELECT account, stream, consumer, judged_at
    FROM verdicts_current
    WHERE verdict = 'FLAPPING'
       OR (findings::VARCHAR LIKE '%FLAPPING%' AND list_contains(json_extract_string(findings, '$[*].verdict'), 'FLAPPING'))
)
SELECT l.account, l.stream, l.consumer, l.switches,
       coalesce(m.most_in_a_window, least(l.switches, 1)) AS most_in_a_window,
       l.first_ts, l.median_pin_seconds, l.p95_pin_seconds, l.ongoing_pin_seconds,
       f.judged_at IS NOT NULL AS flapping, coalesce(l.unpin_reasons, []) AS unpin_reasons, l.sessions
FROM lengths l
LEFT JOIN most m USING (account, stream, consumer)
LEFT JOIN flapping f USING (account, stream, consumer);
