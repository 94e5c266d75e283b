-- The announced holders of the pin ids in $pins (the pins operator actions dropped or found), as
-- the Consumer page reads its pin's: name and how the announcement was checked. One per pin id: a
-- holder whose own consumer had the pin (a pinned advisory, or the live state) first, then a verified one.
WITH held AS (
    SELECT h.pin_id, h.name, h.verification, h.received_at,
           EXISTS (SELECT 1 FROM pin_events p WHERE p.event = 'pinned' AND p.pinned_id = h.pin_id
                   AND p.account IS NOT DISTINCT FROM h.account AND p.stream = h.stream AND p.consumer = h.consumer)
           OR EXISTS (SELECT 1 FROM consumer_current c WHERE c.pinned_id = h.pin_id
                      AND c.account IS NOT DISTINCT FROM h.account AND c.stream = h.stream
                      AND c.consumer = h.consumer) AS own
    FROM pin_holders h WHERE list_contains($pins::VARCHAR[], h.pin_id)
)
SELECT pin_id, name, verification FROM held
QUALIFY row_number() OVER (PARTITION BY pin_id ORDER BY own DESC, verification = 'verified' DESC,
                                                        received_at DESC) = 1;
