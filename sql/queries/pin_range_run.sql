-- Where the pipeline's last run ended (set_pin_range): the sessions before it are the pipeline's.
SELECT run_until FROM (SELECT unnest(getvariable('pin_range')));
