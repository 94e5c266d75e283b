-- The oldest and newest samples not sealed yet (NULL: nothing to seal).
SELECT min(ts), max(ts) FROM samples_recent;
