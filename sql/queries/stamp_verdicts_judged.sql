-- Every verdict judged afresh this cycle was judged now, written or not: the rows this collector
-- judged afresh last cycle carry that cycle's time ($previous). A held last known verdict keeps the
-- time it was last judged, and a row another collector judged keeps its own.
UPDATE verdicts_current SET judged_at = $now WHERE judged_at = $previous;
