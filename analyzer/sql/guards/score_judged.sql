-- What a guard is judged on: the target events where it is not blind, and the dollars of
-- their waste. Reads lf_truth, lf_truth_calls. Parameter targets (when <target> names it).
-- Slots: <target> whether an incident t is one of the guard's targets, <blind> where the
-- guard is blind over a wasted call "tc.".
SELECT count(DISTINCT t.event_id),
       (SELECT coalesce(sum(cost_usd), 0) FROM (
            SELECT DISTINCT tc.call_id, tc.cost_usd
            FROM lf_truth t JOIN lf_truth_calls tc USING (incident_id)
            WHERE {{target}} AND NOT ({{blind}})))
FROM lf_truth t JOIN lf_truth_calls tc USING (incident_id)
WHERE {{target}} AND NOT ({{blind}});
