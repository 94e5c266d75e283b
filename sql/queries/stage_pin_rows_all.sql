-- The sessions pin_sessions_rows lists, when the viewer chose no consumers: every one of the range.
CREATE OR REPLACE TEMP VIEW pin_rolled_shown AS SELECT * FROM pin_sessions_rolled;
CREATE OR REPLACE TEMP VIEW pin_live_shown AS SELECT * FROM pin_sessions_live;
