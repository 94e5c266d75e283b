-- The numbers of the consumers whose last sealed samples this pass deleted (a consumer deleted long
-- ago, an ephemeral one): without this the table keeps every consumer ever sealed, and each sealing
-- pass joins its span against all of it. A consumer seen again gets a new number when its next span
-- is sealed; a number is never read without sealed rows that carry it. (The sealed numbers are
-- listed whole: one scan is cheaper than probing them for each of the few candidates.)
DELETE FROM consumer_ids
WHERE cid IN (SELECT i.cid FROM consumer_ids AS i
              SEMI JOIN covered_hours AS c
                ON c.account = i.account AND c.stream = i.stream AND c.consumer = i.consumer)
  AND cid NOT IN (SELECT DISTINCT cid FROM samples_sealed);
