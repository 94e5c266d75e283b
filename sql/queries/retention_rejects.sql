DELETE FROM rejects WHERE ts < $cutoff;
