INSERT INTO samples_recent BY NAME SELECT * FROM cycle_samples;
