-- How many samples a pass seals, and the numbers their consumers may have.
SELECT (SELECT count(*) FROM samples_recent WHERE ts < $until), (SELECT coalesce(max(cid) + 1, 0) FROM consumer_ids);
