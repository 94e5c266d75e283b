-- What CONNZ said of pin holders' connections, past event retention.
DELETE FROM pin_holder_exits WHERE checked_at < $cutoff
