-- Pull settings last announced before event retention.
DELETE FROM pull_settings WHERE received_at < $cutoff;
