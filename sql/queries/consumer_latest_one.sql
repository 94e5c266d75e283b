-- One consumer's live state with its limits (the Consumer page: never every consumer's row).
SELECT * FROM consumer_latest WHERE ($account IS NULL OR account = $account) AND stream = $stream AND consumer = $consumer;
