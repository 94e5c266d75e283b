DELETE FROM inferred_pin_events WHERE ts < $cutoff;
