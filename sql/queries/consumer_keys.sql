-- Every consumer in the live state, named only (the Consumer page's picker).
SELECT account, stream, consumer FROM consumer_current ORDER BY stream, consumer, account;
