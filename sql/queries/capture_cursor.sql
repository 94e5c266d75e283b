SELECT stream_created, last_seq, last_ts FROM capture_cursor WHERE stream = $stream;
