-- The verdicts of the previous cycle, to find this cycle's transitions.
SELECT account, stream, consumer, verdict, since FROM verdicts_current;
