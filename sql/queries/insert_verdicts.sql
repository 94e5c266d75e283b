INSERT INTO verdict_history BY NAME
SELECT ts, account, stream, consumer, verdict, reasons FROM verdict_batch
WHERE ts >= $since AND ts < $until;
