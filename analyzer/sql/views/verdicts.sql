-- Each run's verdict (the runs table's columns, in the order of views/verdicts.py's Verdict fields),
-- its calls in the store, and, for a run whose log states no cost that is divided over its
-- calls (cut off before it), the dollars of its calls and its sub-agents' priced at list
-- prices (estimated, estimated_output); in stream order.
-- Slot: only, a WHERE clause on runs r (the sessions named in parameter s), or nothing for
-- every run. Parameter: s (a list of session ids, with that clause).
SELECT r.session_id, r.stream_key, r.seq, r.agent, r.exit_status, r.outcome, r.is_error,
       r.result_excerpt, r.reported_calls, r.reported_input_tokens, r.reported_output_tokens,
       r.reported_cost_usd, r.cost_apportioned, r.duration_ms, r.step_limit, r.cost_limit_usd,
       (SELECT count(*) FROM live_calls c WHERE c.session_id = r.session_id),
       CASE WHEN NOT coalesce(r.cost_apportioned, false) THEN
           (SELECT sum(c.cost_usd) FROM live_calls c
            WHERE coalesce(c.parent_session_id, c.session_id) = r.session_id
              AND c.cost_basis IN ('estimated', 'estimated_output')) END
FROM runs r {{only}}
ORDER BY r.stream_key, r.seq, r.session_id;
