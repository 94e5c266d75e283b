-- Captured unpin requests past event retention.
DELETE FROM unpin_requests WHERE ts < $cutoff
