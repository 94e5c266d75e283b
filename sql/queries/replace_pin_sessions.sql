DELETE FROM pin_sessions;
