-- The verdicts of the previous cycle, to find this cycle's transitions and to hold a last known
-- verdict when too few fresh samples remain to judge again (after the collector was away).
SELECT account, stream, consumer, verdict, since, reason, findings::VARCHAR AS findings, judged_at
FROM verdicts_current;
