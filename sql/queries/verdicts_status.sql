-- The fleet's verdicts for `jetwatch status` and `jetwatch check`.
SELECT v.account, v.stream, v.consumer, v.verdict, v.level, v.reason, v.since, v.judged_at, v.findings
FROM verdicts_current v
ORDER BY v.account, v.stream, v.consumer;
