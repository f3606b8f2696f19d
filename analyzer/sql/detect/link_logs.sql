-- The logs still unlinked (lf_link_logs), as a table of their own: few next to the bills, and
-- the planner then knows it (a CTE's size is guessed, and 10M bills were hashed for it); each
-- with its bucket of the window's width (bk). Returns the logs' time range widened by the
-- window (lo, hi): given as values, the range lets the scan of the bills skip the row groups
-- outside it. Slots: {{is_bill}} (the predicate that says a call is a bill), {{window_s}} (the
-- window in seconds), {{window_us}} (the same in microseconds).
CREATE OR REPLACE TEMP TABLE lf_link_logs AS
SELECT call_id, ts, lf_model_key(model) AS mk, input_tokens, output_tokens,
       output_final, response_id,
       epoch_us(ts) // {{window_us}} AS bk
FROM calls
WHERE NOT {{is_bill}} AND billing_call_id IS NULL AND ts IS NOT NULL;

SELECT min(ts) - INTERVAL {{window_s}} SECOND, max(ts) + INTERVAL {{window_s}} SECOND
FROM lf_link_logs;
