-- The announced holders of pins received since $since, for the collector's /metrics labels after a restart.
SELECT account, stream, consumer, pin_id, name, verification FROM pin_holders WHERE received_at >= $since;
