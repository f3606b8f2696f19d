-- The dollars the incidents $ids wasted, each wasted call counted once. Incidents of different
-- detectors may tell the same calls (a failing command repeated is repeated_tool_call's and
-- same_error_retry's both): their wasted_usd added up would count those calls twice, and a
-- file's waste could exceed its spend. An incident whose wasted_usd is the cost of its wasted
-- calls (incident_calls: every detector's, where it names them or by its first and last call)
-- adds its calls, each call once over all of them; any other adds its wasted_usd. No slots.
WITH picked AS (
    SELECT incident_id, wasted_usd FROM incidents WHERE list_contains($ids, incident_id)
),
priced AS (
    SELECT p.incident_id, any_value(p.wasted_usd) AS wasted_usd,
           sum(coalesce(c.cost_usd, 0)) AS calls_usd
    FROM picked p
    JOIN incident_calls ic ON ic.incident_id = p.incident_id
    JOIN calls c ON c.call_id = ic.call_id
    GROUP BY p.incident_id
),
whole AS (
    SELECT incident_id FROM priced WHERE wasted_usd > 0 AND calls_usd = wasted_usd
)
SELECT coalesce((SELECT sum(wasted_usd) FROM picked
                 WHERE incident_id NOT IN (SELECT incident_id FROM whole)), 0)
     + coalesce((SELECT sum(coalesce(cost_usd, 0)) FROM calls
                 WHERE call_id IN (SELECT ic.call_id FROM incident_calls ic
                                   JOIN whole w ON w.incident_id = ic.incident_id)), 0)
