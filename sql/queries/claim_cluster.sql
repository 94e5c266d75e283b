-- A store belongs to the cluster that first wrote it: the first collector records its --cluster,
-- every later one reads it back (store/clusters.py refuses a collector of another cluster).
INSERT OR IGNORE INTO store_meta VALUES ('cluster', $cluster);
