-- The range a page reads pin history over, for stage_pin_tail and pin_sessions_range (a view cannot
-- take parameters): since, until, and the cut between what the pipeline rolled up and the live tail.
-- The cut is the end of the pipeline's last run (`run_until`), or the range's start when that is
-- later (or there was no run), never past the range's end. $account, $stream and $consumer NULL:
-- every consumer; set: that one only ($account NULL: in whichever account). $search and $reasons:
-- the consumers whose sessions a page lists (stage_pin_rows_chosen).
SET VARIABLE pin_range = (
    SELECT {'since': $since::TIMESTAMPTZ, 'until': $until::TIMESTAMPTZ, 'run_until': max(until_ts),
            'cut': least($until::TIMESTAMPTZ, greatest($since::TIMESTAMPTZ, coalesce(max(until_ts), $since::TIMESTAMPTZ))),
            'account': $account::VARCHAR, 'stream': $stream::VARCHAR, 'consumer': $consumer::VARCHAR,
            'health_window_seconds': $health_window::DOUBLE, 'search': $search::VARCHAR,
            'reasons': $reasons::VARCHAR[]}
    FROM pipeline_runs WHERE outcome = 'ok'
);
