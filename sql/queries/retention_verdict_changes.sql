DELETE FROM verdict_changes WHERE ts < $cutoff;
