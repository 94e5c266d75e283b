-- Where the health window starts, for stage_window_samples (a view cannot take parameters).
SET VARIABLE window_since = $since;
