-- How many pins ended between $since and $until (unpinned advisories and inferred unpins): the collector
-- asks pin_moves for their causes only when this says there is a move it has not counted yet.
SELECT (SELECT count(*) FROM advisories
        WHERE kind = 'consumer_group_unpinned' AND ts >= $since AND ts <= $until
          AND stream IS NOT NULL AND consumer IS NOT NULL)
     + (SELECT count(*) FROM inferred_pin_events WHERE event = 'unpinned' AND ts >= $since AND ts <= $until);
