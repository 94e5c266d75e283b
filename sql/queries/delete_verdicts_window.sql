DELETE FROM verdict_history WHERE ts >= $since AND ts < $until;
