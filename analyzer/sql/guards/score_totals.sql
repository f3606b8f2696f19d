-- The replay's totals for a guard's blindness and reach: the calls where it is blind, all
-- calls, and the healthy units it sees (holding no incident's waste). Reads lf_events,
-- lf_truth_calls. Slots: <blind> where the guard is blind over a call, <unit> the reach's
-- unit column.
SELECT count(*) FILTER (WHERE ({{blind}})), count(*),
       count(DISTINCT {{unit}}) FILTER (WHERE NOT ({{blind}}) AND {{unit}} NOT IN
           (SELECT DISTINCT {{unit}} FROM lf_truth_calls
           WHERE {{unit}} IS NOT NULL))
FROM lf_events;
