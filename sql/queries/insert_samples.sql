-- $sampled_at: the collector's time of the cycle (what sealing goes by); `cycle`: its number, now
-- current_cycle's (what the view consumer_current goes by).
INSERT INTO samples_recent BY NAME
SELECT *, $sampled_at::TIMESTAMPTZ AS sampled_at, (SELECT cycle FROM current_cycle) AS cycle FROM cycle_samples;
