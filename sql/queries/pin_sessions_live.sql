-- The sessions stage_pin_sessions made of its relation session_events.
SELECT * FROM pin_sessions_live;
