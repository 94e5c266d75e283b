-- Finished drains past retention go; one still draining stays.
DELETE FROM drains WHERE updated_at < $cutoff AND state <> 'draining';
