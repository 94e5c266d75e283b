-- Where an ongoing pin ends for stage_pin_sessions: now (a view cannot take parameters).
SET VARIABLE sessions_until = $until::TIMESTAMPTZ;
