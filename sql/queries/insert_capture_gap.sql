INSERT INTO capture_gaps VALUES ($detected_at, $stream, $from_seq, $to_seq, $missed, $from_ts, $to_ts, $reason);
