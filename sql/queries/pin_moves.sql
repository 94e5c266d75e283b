-- Why each pin moved: one row per pin that ended between $since and $until (an unpinned advisory, or an
-- unpin jetwatch inferred from sampled state), with the pin it ended, the pin that followed, and its cause,
-- the first of these that the stored facts show:
--   operator_unpin       the server's reason is `admin`: by whom from jetwatch's audit log (an unpin or a
--                        drain's hand-off, done within $match_seconds, the audit row's nearest admin unpin),
--                        else from the captured API unpin request (unpin_requests: the client that asked,
--                        matched the same way), else nobody captured
--   leader_change        the pin was replaced with no unpinned advisory and the consumer elected a leader
--                        between the two pins (the pin lives in the leader's memory only)
--   deploy               the holder's announced version differs from the next holder's, or pins of at least
--                        $deploy_groups consumers moved (other than by operator or leader change, and not
--                        from a holder CONNZ showed still connected) within $deploy_window_seconds of this one
--   holder_disconnected  CONNZ showed the holder's announced connection closed (pin_holder_exits)
--   priority_timeout     the server's reason is `timeout`: the holder's last pull carrying the pin id was
--                        priority_timeout before the unpin (the server restarts the timer on each such pull)
--   unknown              none of the above (an inferred unpin without a leader election: advisories missed)
-- $account, $stream and $consumer NULL: every consumer; set: that one only ($account NULL: any account).
-- Bursts are counted over every consumer whatever the filter, so one consumer's row says the same as the fleet's.
WITH ends AS (
    SELECT ts, account, stream, consumer, group_name, reason, 'advisory' AS source, NULL::VARCHAR AS closes_id
    FROM advisories
    WHERE kind = 'consumer_group_unpinned' AND stream IS NOT NULL AND consumer IS NOT NULL
      AND ts >= $since - to_seconds($deploy_window_seconds::DOUBLE)
      AND ts <= $until + to_seconds($deploy_window_seconds::DOUBLE)
    UNION ALL
    SELECT ts, account, stream, consumer, group_name, NULL AS reason, 'inferred' AS source, closes_id
    FROM inferred_pin_events
    WHERE event = 'unpinned'
      AND ts >= $since - to_seconds($deploy_window_seconds::DOUBLE)
      AND ts <= $until + to_seconds($deploy_window_seconds::DOUBLE)
),
pins AS (
    SELECT ts, account, stream, consumer, pinned_id FROM pin_events WHERE event = 'pinned'
),
pin_starts AS (
    SELECT account, stream, consumer, pinned_id, min(ts) AS ts FROM pins GROUP BY ALL
),
before AS (  -- the pin each advisory unpin ended: the last pin at or before it
    SELECT e.*, p.pinned_id AS before_pin, p.ts AS before_ts
    FROM ends e ASOF LEFT JOIN pins p
      ON p.account = e.account AND p.stream = e.stream AND p.consumer = e.consumer AND e.ts >= p.ts
),
after AS (  -- the pin that followed: the first pin at or after it
    SELECT b.*, n.pinned_id AS next_pin, n.ts AS next_ts
    FROM before b ASOF LEFT JOIN pins n
      ON n.account = b.account AND n.stream = b.stream AND n.consumer = b.consumer AND n.ts >= b.ts
),
moves AS (
    SELECT a.ts, a.account, a.stream, a.consumer, a.group_name, a.reason, a.source,
           coalesce(a.closes_id, a.before_pin) AS from_pin,
           coalesce(s.ts, a.before_ts) AS from_ts,
           CASE WHEN a.next_pin IS DISTINCT FROM coalesce(a.closes_id, a.before_pin) THEN a.next_pin END AS to_pin,
           CASE WHEN a.next_pin IS DISTINCT FROM coalesce(a.closes_id, a.before_pin) THEN a.next_ts END AS to_ts,
           row_number() OVER (ORDER BY a.account, a.stream, a.consumer, a.ts, a.source) AS n
    FROM after a
    LEFT JOIN pin_starts s ON s.account = a.account AND s.stream = a.stream AND s.consumer = a.consumer
                          AND s.pinned_id = a.closes_id
),
-- An admin unpin and the request behind it: each audit row (and each captured request) explains the admin
-- unpin nearest to it, and each unpin takes the nearest of those it is left with.
audited AS (
    SELECT m.n, x.actor, abs(epoch(x.ts) - epoch(m.ts)) AS apart
    FROM moves m JOIN audit x
      ON m.reason = 'admin' AND x.action IN ('unpin', 'drain') AND x.outcome = 'ok'
     AND coalesce(x.phase, 'outcome') <> 'intent' AND x.stream = m.stream AND x.consumer = m.consumer
     AND (x.account IS NULL OR x.account = m.account)
     AND x.ts BETWEEN m.ts - to_seconds($match_seconds::DOUBLE) AND m.ts + to_seconds($match_seconds::DOUBLE)
    QUALIFY row_number() OVER (PARTITION BY x.rowid ORDER BY apart, m.n) = 1
),
operators AS (
    SELECT n, actor FROM audited QUALIFY row_number() OVER (PARTITION BY n ORDER BY apart) = 1
),
asked AS (
    SELECT m.n, {'name': r.client_name, 'id': r.client_id, 'host': r.client_host, 'user': r.client_user,
                 'account': r.client_account} AS requester, abs(epoch(r.ts) - epoch(m.ts)) AS apart
    FROM moves m JOIN unpin_requests r
      ON m.reason = 'admin' AND r.error IS NULL AND r.stream = m.stream AND r.consumer = m.consumer
     AND (r.account IS NULL OR r.account = m.account)
     AND r.ts BETWEEN m.ts - to_seconds($match_seconds::DOUBLE) AND m.ts + to_seconds($match_seconds::DOUBLE)
    QUALIFY row_number() OVER (PARTITION BY r.id ORDER BY apart, m.n) = 1
),
requesters AS (
    SELECT n, requester FROM asked QUALIFY row_number() OVER (PARTITION BY n ORDER BY apart) = 1
),
facts AS (
    SELECT m.*, o.actor AS operator, q.requester,
           (SELECT arg_max({'ts': l.ts, 'leader': json_extract_string(l.raw, '$.leader')}, l.ts) FROM advisories l
            WHERE l.kind = 'consumer_leader_elected' AND l.stream = m.stream AND l.consumer = m.consumer
              AND l.account = m.account
              AND l.ts >= coalesce(m.from_ts, m.ts - to_seconds($match_seconds::DOUBLE))
              AND l.ts <= coalesce(m.to_ts, m.ts) + to_seconds($match_seconds::DOUBLE)
           ) AS election,
           (SELECT arg_max(c.priority_timeout_ns, c.ts) FROM consumer_configs c
            WHERE c.account = m.account AND c.stream = m.stream AND c.consumer = m.consumer AND c.ts <= m.ts
           ) AS priority_timeout_ns
    FROM moves m LEFT JOIN operators o USING (n) LEFT JOIN requesters q USING (n)
),
decided AS (
    SELECT f.*, hf.name AS from_holder, hf.version AS from_version, hf.verification AS from_verification,
           ht.name AS to_holder, ht.version AS to_version, ht.verification AS to_verification, x.state AS exit_state, x.stopped_at, x.stop_reason,
           CASE WHEN f.reason = 'admin' THEN 'operator_unpin'
                WHEN f.source = 'inferred' AND f.election IS NOT NULL THEN 'leader_change' END AS decided
    FROM facts f
    LEFT JOIN pin_holders hf ON hf.pin_id = f.from_pin AND hf.account IS NOT DISTINCT FROM f.account AND hf.stream = f.stream
          AND hf.consumer = f.consumer
    LEFT JOIN pin_holders ht ON ht.pin_id = f.to_pin AND ht.account IS NOT DISTINCT FROM f.account AND ht.stream = f.stream
          AND ht.consumer = f.consumer
    LEFT JOIN pin_holder_exits x ON x.pin_id = f.from_pin
),
bursts AS (  -- consumers whose pins moved (other than by operator or leader change, and not from a holder
             -- CONNZ showed still connected) within the window of each
    SELECT n, count(DISTINCT concat_ws(chr(31), account, stream, consumer)) OVER (
               ORDER BY ts RANGE BETWEEN to_seconds($deploy_window_seconds::DOUBLE) PRECEDING
                                     AND to_seconds($deploy_window_seconds::DOUBLE) FOLLOWING) AS groups
    FROM decided WHERE decided IS NULL AND exit_state IS DISTINCT FROM 'open'
)
SELECT d.ts, d.account, d.stream, d.consumer, d.group_name, d.source, d.reason, d.from_pin, d.from_ts, d.to_pin, d.to_ts,
       CASE WHEN d.decided IS NOT NULL THEN d.decided
            WHEN d.from_version IS NOT NULL AND d.to_version IS NOT NULL AND d.from_version <> d.to_version THEN 'deploy'
            WHEN coalesce(bu.groups, 0) >= $deploy_groups THEN 'deploy'
            WHEN d.exit_state = 'closed' THEN 'holder_disconnected'
            WHEN d.reason = 'timeout' THEN 'priority_timeout'
            ELSE 'unknown' END AS cause,
       d.operator, d.requester.name AS requester_name, d.requester.id AS requester_id,
       d.requester.host AS requester_host, d.requester.user AS requester_user,
       d.requester.account AS requester_account,
       d.election.ts AS leader_elected_at, d.election.leader AS new_leader,
       CASE WHEN d.decided IS NULL THEN coalesce(bu.groups, 0) END AS burst_groups,
       d.from_holder, d.from_version, d.from_verification, d.to_holder, d.to_version, d.to_verification,
       d.exit_state, d.stopped_at, d.stop_reason,
       d.priority_timeout_ns / 1e9 AS priority_timeout_seconds,
       CASE WHEN d.reason = 'timeout' AND d.priority_timeout_ns > 0
            THEN d.ts - to_seconds(d.priority_timeout_ns / 1e9) END AS last_pull_at
FROM decided d LEFT JOIN bursts bu USING (n)
WHERE d.ts >= $since AND d.ts <= $until
  AND ($consumer IS NULL OR (($account IS NULL OR d.account = $account) AND d.stream = $stream AND d.consumer = $consumer))
ORDER BY d.account, d.stream, d.consumer, d.ts;
