-- Held rows of consumers this cycle read after all (what $kept named was also in the batch: one
-- server's entry rejected and another's read, a stream listed in part): the sample read is the live
-- state, as in the collector's memory, and the consumer is not shown twice. Run only when the cycle
-- kept something: otherwise no held row can be one the cycle read.
DELETE FROM current_held AS h
USING cycle_samples AS s
WHERE s.account = h.account AND s.stream = h.stream AND s.consumer = h.consumer;
