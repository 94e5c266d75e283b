-- A cycle reads each consumer once (JSZ mode takes each from its leader only): no dedup needed.
INSERT INTO consumer_current BY NAME SELECT * FROM cycle_samples;
