SELECT stream_created, last_seq, last_ts, awaiting FROM capture_cursor WHERE stream = $stream;
