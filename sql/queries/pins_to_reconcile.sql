-- Whether reconcile_pins has anything to look at: a pin event stored (an advisory or an inferred
-- event), or a sample within the horizon that shows a pin. Each of its statements starts from one
-- of these, so without any it can add nothing: a fleet without priority groups skips them.
SELECT EXISTS (SELECT 1 FROM advisories WHERE kind IN ('consumer_group_pinned', 'consumer_group_unpinned'))
    OR EXISTS (SELECT 1 FROM inferred_pin_events)
    OR EXISTS (SELECT 1 FROM samples WHERE ts > $horizon AND pinned_id IS NOT NULL);
