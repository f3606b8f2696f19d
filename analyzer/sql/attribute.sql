-- What each incident in $ids is attributed to: its app, API key, model, project, machine and
-- labels (calls.labels, the JSON text as a whole),
-- each the most common value among its wasted calls (incident_calls), a tie going to the value whose
-- calls wasted more dollars, then to the first name in order; an incident without wasted calls
-- takes its first call's. A call that carries no value does not vote. Run once, when the
-- incident is recorded (analyzer.detect.detectors.record; and over every incident when a store of an
-- earlier format is upgraded): every view reads the columns, none decides again.
UPDATE incidents SET app = a.app, api_key = a.api_key, model = a.model, project = a.project,
                     machine = a.machine, labels = a.labels
FROM (
    WITH mine AS (
        SELECT incident_id, first_call_id FROM incidents WHERE list_contains($ids, incident_id)),
    ic AS (
        SELECT incident_id, call_id FROM incident_calls
        WHERE incident_id IN (SELECT incident_id FROM mine)
        UNION
        SELECT incident_id, first_call_id FROM mine
        WHERE first_call_id IS NOT NULL
          AND incident_id NOT IN (SELECT incident_id FROM incident_calls)),
    -- (the calls filtered first: then only those few carry their other columns)
    c AS (
        SELECT ic.incident_id, c.app, c.api_key, c.model, c.project, c.machine, c.labels,
               coalesce(c.cost_usd, 0) AS usd
        FROM ic JOIN (SELECT call_id, app, api_key, model, project, machine, labels, cost_usd
                      FROM calls
                      WHERE call_id IN (SELECT call_id FROM ic)) c USING (call_id)),
    votes AS (UNPIVOT c ON app, api_key, model, project, machine, labels
              INTO NAME what VALUE v),
    tally AS (SELECT incident_id, what, v, count(*) AS n, sum(usd) AS usd FROM votes GROUP BY ALL),
    chosen AS (
        SELECT incident_id, what, first(v ORDER BY n DESC, usd DESC, v) AS v
        FROM tally GROUP BY ALL)
    SELECT incident_id,
           any_value(v) FILTER (WHERE what = 'app') AS app,
           any_value(v) FILTER (WHERE what = 'api_key') AS api_key,
           any_value(v) FILTER (WHERE what = 'model') AS model,
           any_value(v) FILTER (WHERE what = 'project') AS project,
           any_value(v) FILTER (WHERE what = 'machine') AS machine,
           any_value(v) FILTER (WHERE what = 'labels') AS labels
    FROM chosen GROUP BY incident_id
) a
WHERE incidents.incident_id = a.incident_id
