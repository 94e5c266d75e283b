INSERT OR REPLACE INTO capture_cursor VALUES ($stream, $stream_created, $last_seq, $last_ts, $updated_at);
