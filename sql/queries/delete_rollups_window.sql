DELETE FROM rollups WHERE bucket >= $since AND bucket < $until;
