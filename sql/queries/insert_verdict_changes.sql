INSERT INTO verdict_changes BY NAME
SELECT ts::TIMESTAMPTZ AS ts, account, stream, consumer, from_verdict, to_verdict, reason
FROM change_batch;
