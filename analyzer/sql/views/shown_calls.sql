-- The calls `show` lists for an incident, in the order of the ids given: time, model, tokens,
-- cost, finish, kind, the first tool call and its arguments (else the reply's text), what came
-- back for that tool call, whether the call is counted as waste, and whether the reply was
-- kept. Parameters: ids (the call ids, in order), iid (the incident's id).
WITH ids AS (SELECT unnest($ids) AS call_id, generate_subscripts($ids, 1) AS i),
tc AS (  -- the call's first tool call, and what came back for it
    SELECT m.call_id, arg_min(m.tool_name, m.idx) AS tool,
           arg_min(m.excerpt, m.idx) AS args, arg_min(m.tool_use_id, m.idx) AS tuid,
           any_value(m.session_id) AS sid
    FROM messages m WHERE m.kind = 'tool_call' AND m.call_id IN (SELECT call_id FROM ids)
    GROUP BY 1),
txt AS (
    SELECT call_id, arg_min(excerpt, idx) AS text FROM messages
    WHERE kind = 'text' AND call_id IN (SELECT call_id FROM ids) GROUP BY 1)
SELECT c.ts, c.model, c.input_tokens, c.output_tokens, c.cost_usd, c.finish_reason,
       c.response_kind, tc.tool, coalesce(tc.args, txt.text),
       (SELECT first(r.excerpt) FROM messages r
        WHERE r.kind = 'tool_result' AND r.tool_use_id = tc.tuid
          AND r.session_id = tc.sid),
       c.call_id IN (SELECT call_id FROM incident_calls WHERE incident_id = $iid),
       c.reply_saved
FROM ids JOIN calls c USING (call_id)
LEFT JOIN tc USING (call_id) LEFT JOIN txt USING (call_id)
ORDER BY ids.i;
