-- $sampled_at: the collector's time of the cycle (what sealing goes by).
INSERT INTO samples_recent BY NAME SELECT *, $sampled_at::TIMESTAMPTZ AS sampled_at FROM cycle_samples;
