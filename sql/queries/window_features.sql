-- Window features: each consumer's samples in one health window reduced to what the rules of
-- health/rules.py look at. The one definition: the dashboard runs it inside the store over the
-- view stage_window_samples.sql makes, the pipeline over each window group through
-- health.features (in-process DuckDB).
-- Input relation `window_samples`: account, stream, consumer, ts, created, num_pending,
-- num_ack_pending, num_waiting, num_redelivered, delivered_consumer_seq, delivered_stream_seq,
-- ack_floor_stream_seq, paused, pinned_id, oldest_unacked_age_seconds.
WITH base AS (
    SELECT account, stream, consumer, hash(account, stream, consumer) AS k, ts, epoch(ts) AS t, epoch(created) AS created,
           coalesce(num_pending, 0)::DOUBLE AS pending, coalesce(num_ack_pending, 0)::DOUBLE AS ack_pending,
           coalesce(num_waiting, 0)::DOUBLE AS waiting, coalesce(num_redelivered, 0)::DOUBLE AS redelivered,
           coalesce(delivered_consumer_seq, 0)::DOUBLE AS dcs, coalesce(delivered_stream_seq, 0)::DOUBLE AS dss,
           coalesce(ack_floor_stream_seq, 0)::DOUBLE AS afs, coalesce(paused, false) AS paused, pinned_id,
           coalesce(oldest_unacked_age_seconds, 0)::DOUBLE AS unacked_age
    FROM window_samples
),
lagged AS (
    -- The one ordered pass: every "previous sample" value the features need.
    SELECT *, lag(dcs) OVER w AS p_dcs, lag(created) OVER w AS p_created, lag(pending) OVER w AS p_pending,
           lag(redelivered) OVER w AS p_redelivered, lag(pinned_id) OVER w AS p_pinned
    FROM base
    WINDOW w AS (PARTITION BY k ORDER BY t ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
),
per_consumer AS (
    -- A consumer recreated under the same name starts its sequences over (a reset): only the
    -- samples since its latest reset count. The trailing no-pin run follows the last sample that
    -- had a pin or nothing pending (a break before the reset leaves every later sample in it).
    SELECT k,
           coalesce(max(t) FILTER (WHERE dcs < p_dcs OR (created IS NOT NULL AND p_created IS NOT NULL
                                                         AND created <> p_created)), -1e18) AS reset_t,
           max(t) FILTER (WHERE NOT (pinned_id IS NULL AND pending > 0)) AS last_break_t,
           min(t) AS t0
    FROM lagged
    GROUP BY k
),
stepped AS (
    SELECT l.*, c.last_break_t,
           t - c.t0 AS tc, pending + ack_pending AS backlog,  -- times from the consumer's first: full precision
           CASE WHEN t > reset_t THEN pending - p_pending END AS d_pending,
           CASE WHEN t > reset_t THEN redelivered - p_redelivered END AS d_redelivered,
           CASE WHEN t > reset_t THEN p_pinned END AS prev_pinned,
           (pinned_id IS NULL AND pending > 0) AS nopin
    FROM lagged l JOIN per_consumer c USING (k)
    WHERE t >= reset_t
)
SELECT account, stream, consumer,
       count(*) AS samples,
       max(t) - min(t) AS span_seconds,
       arg_max(ts, t) AS last_ts,
       arg_min(pending, t) AS pending_first,
       arg_max(pending, t) AS pending_last,
       min(pending) AS pending_min,
       coalesce(regr_slope(pending, t), 0.0) AS pending_slope,
       coalesce(count(*) FILTER (WHERE d_pending > 0) / nullif(count(d_pending), 0), 0.0) AS pending_rising_share,
       min(ack_pending) AS ack_pending_min,
       arg_max(ack_pending, t) AS ack_pending_last,
       list_min(arg_max(ack_pending, t, 3)) AS ack_pending_recent_min,
       max(waiting) AS waiting_max,
       arg_max(waiting, t) AS waiting_last,
       list_min(arg_max(waiting, t, 3)) AS waiting_recent_min,
       arg_max(dcs, t) > arg_min(dcs, t) AS delivered_moved,
       arg_max(afs, t) > arg_min(afs, t) AS ack_floor_moved,
       greatest(arg_max(dcs, t) - arg_min(dcs, t), 0) AS deliveries,
       greatest(arg_max(dss, t) - arg_min(dss, t), 0) AS stream_delivered,
       greatest(arg_max(afs, t) - arg_min(afs, t), 0) AS acked,
       arg_min(redelivered, t) AS redelivered_first,
       arg_max(redelivered, t) AS redelivered_last,
       min(redelivered) AS redelivered_min,
       count(*) FILTER (WHERE d_redelivered < 0) = 0 AS redelivered_never_falls,
       arg_max(paused, t) AS paused_last,
       arg_max(unacked_age, t) AS unacked_age_last,
       -- The trend of the backlog (pending + in flight) and its standard error: the drain ETA's rate and range.
       regr_slope(backlog, tc) AS backlog_slope,
       CASE WHEN regr_count(backlog, tc) > 2 AND regr_sxx(backlog, tc) > 0
            THEN sqrt(greatest(regr_syy(backlog, tc) - regr_sxy(backlog, tc) * regr_sxy(backlog, tc) / regr_sxx(backlog, tc), 0)
                      / (regr_count(backlog, tc) - 2) / regr_sxx(backlog, tc)) END AS backlog_slope_se,
       coalesce(max(t) - min(t) FILTER (WHERE nopin AND (last_break_t IS NULL OR t > last_break_t)), 0.0)
         AS nopin_seconds,
       count(*) FILTER (WHERE pinned_id IS NOT NULL AND prev_pinned IS NOT NULL AND pinned_id <> prev_pinned)
         AS sample_pin_switches
FROM stepped
GROUP BY k, account, stream, consumer
