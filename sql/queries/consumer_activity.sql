-- When each of the given consumers last showed activity in the stored samples, looking back from
-- its own `from_ts` (its verdict's start less two health windows: the last activity of a consumer
-- judged idle lies after that): a pull waiting or a delivery made (the delivered sequence moved),
-- and an acknowledgement (the ack floor moved). `first_seen` is the oldest sample looked at, so
-- "no activity" reads "not since at least then". Parameters: parallel lists $accounts, $streams,
-- $consumers, $froms.
WITH wanted AS (
    SELECT unnest($accounts::VARCHAR[]) AS account, unnest($streams::VARCHAR[]) AS stream,
           unnest($consumers::VARCHAR[]) AS consumer, unnest($froms::TIMESTAMPTZ[]) AS from_ts
),
stepped AS (
    SELECT s.account, s.stream, s.consumer, s.ts, s.num_waiting,
           s.delivered_consumer_seq - lag(s.delivered_consumer_seq) OVER w AS delivered,
           s.ack_floor_stream_seq - lag(s.ack_floor_stream_seq) OVER w AS acked
    FROM samples s
    JOIN wanted ON s.account = wanted.account AND s.stream = wanted.stream AND s.consumer = wanted.consumer
    WHERE s.ts >= wanted.from_ts
      AND s.ts >= (SELECT min(from_ts) FROM wanted)  -- a constant bound: the scan skips older row groups
    WINDOW w AS (PARTITION BY s.account, s.stream, s.consumer ORDER BY s.ts)
)
SELECT account, stream, consumer, min(ts) AS first_seen,
       max(ts) FILTER (WHERE num_waiting > 0 OR delivered > 0) AS last_pull,
       max(ts) FILTER (WHERE acked > 0) AS last_ack
FROM stepped
GROUP BY ALL;
