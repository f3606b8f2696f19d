-- What the agent answered each call, from its messages (the guard replay's refused, error_key
-- and result_key; analyzer/replay.py): refused - it could not parse the reply (a
-- format_error); error_key - the error its tool results said, when every one was an error and
-- they said the same (errors are hashed at ingest on what they say); result_key - what its
-- tool results were, in order (the same action getting the same result back has the same key).
CREATE OR REPLACE TEMP VIEW lf_outcomes AS
SELECT m.call_id,
       bool_or(m.kind = 'format_error') AS refused,
       CASE WHEN count(r.tool_use_id) > 0 AND bool_and(coalesce(r.is_error, false))
                 AND count(DISTINCT r.tool_result_hash) = 1
            THEN min(r.tool_result_hash) END AS error_key,
       string_agg(coalesce(r.tool_result_hash, '?'), ';' ORDER BY m.idx)
           FILTER (WHERE m.kind = 'tool_call') AS result_key
FROM messages m
LEFT JOIN messages r ON r.kind = 'tool_result' AND m.kind = 'tool_call'
                    AND r.tool_use_id = m.tool_use_id AND r.session_id = m.session_id
WHERE m.call_id IS NOT NULL AND m.kind IN ('tool_call', 'format_error')
GROUP BY m.call_id;
