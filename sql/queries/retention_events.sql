DELETE FROM advisories WHERE ts < $cutoff;
