-- Reads of dropped messages past event retention (their advisories go at the same age).
DELETE FROM dropped_message_reads WHERE read_at < $cutoff;
