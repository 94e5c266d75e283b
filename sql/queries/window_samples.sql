-- Samples of the health window for the consumers in the live state. Reads only the recent end
-- of the samples table (the ts filter prunes by zone maps).
SELECT s.account, s.stream, s.consumer, s.ts, s.created, s.num_pending, s.num_ack_pending,
       s.num_waiting, s.num_redelivered, s.delivered_consumer_seq, s.delivered_stream_seq,
       s.ack_floor_stream_seq, s.paused, s.pinned_id
FROM samples s
SEMI JOIN consumer_current c USING (account, stream, consumer)
WHERE s.ts >= $since;
