-- Consumers that left the live state (the registered Arrow table `gone_batch`) lose their verdict.
DELETE FROM verdicts_current v
USING gone_batch g
WHERE v.account = g.account AND v.stream = g.stream AND v.consumer = g.consumer;
