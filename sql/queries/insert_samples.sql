INSERT INTO samples BY NAME SELECT * FROM cycle_samples;
