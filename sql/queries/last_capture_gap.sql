-- When the newest gap in the advisory record was found (NULL: never).
SELECT max(detected_at) FROM capture_gaps;
