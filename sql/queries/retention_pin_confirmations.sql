DELETE FROM pin_confirmations WHERE decided_at < $cutoff AND advisory_id NOT IN (SELECT id FROM advisories);
