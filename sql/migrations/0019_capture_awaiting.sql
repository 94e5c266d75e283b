-- Migration 19: the capture-stream sequences the collector has seen skipped while the stream still
-- held them (`awaiting`, JSON: [[from_seq, to_seq, from_ts, to_ts], ...]). A durable redelivers
-- what a stopped collector fetched and never acknowledged after the newer messages it hands out
-- first, so a jump in the sequence is a loss only for what the stream no longer holds; the rest
-- is awaited, kept with the cursor so a restart awaits it too, and booked as a gap only once the
-- stream's limits have removed it unread (collectors/capture_gaps.py).
ALTER TABLE capture_cursor ADD COLUMN IF NOT EXISTS awaiting VARCHAR;
