-- Each session's parent (the session it was forked from, or spawned it as a sub-agent: a
-- session whose calls name an agent), for sessions that have one.
-- Slot: only, a further condition on the calls (the sessions named in parameter s), or
-- nothing for every session. Parameter: s (a list of session ids, with that condition).
SELECT session_id, min(parent_session_id), bool_or(agent_id IS NOT NULL)
FROM live_calls
WHERE parent_session_id IS NOT NULL {{only}}
GROUP BY 1;
