DELETE FROM silences WHERE ended_at IS NOT NULL AND ended_at < $cutoff;
