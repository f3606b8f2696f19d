-- name: empty_assistant_persisted
-- title: Empty assistant messages saved to the conversation
-- severity: medium
-- params: min_placeholder_run=2
--
-- An empty or whitespace-only assistant message saved in the history poisons it: providers
-- refuse a conversation that contains one (seed 002's 400s), so a resumed session fails again
-- on restore. Agents that instead save a stand-in such as Penguin's "[Empty response from
-- model]" keep the context moving, but a run of them is still a model answering nothing, call
-- after call (seed 000, after the fix). Found per session: saved assistant messages with no
-- visible text from a call that answered nothing (no tool call, no reasoning), and runs of at
-- least min_placeholder_run placeholder messages in a row. Waste: the calls behind the
-- placeholder runs (the refusals that follow a saved empty message are counted by
-- empty_stream_cascade).
WITH m AS (
    SELECT m.session_id, m.idx, m.kind, m.call_id, m.visible_chars,
           c.stream_key, c.ts, c.seq, c.cost_usd, c.cost_basis, c.input_tokens,
           c.output_tokens, c.response_kind
    FROM messages m LEFT JOIN calls c ON c.call_id = m.call_id
    WHERE m.role = 'assistant' AND m.kind IN ('text', 'placeholder', 'tool_call')
),
f AS (
    SELECT *,
           kind = 'placeholder' AS placeholder,
           kind = 'text' AND coalesce(visible_chars, 0) = 0
               AND response_kind IN ('empty', 'whitespace') AS blank
    FROM m
),
runs AS (
    SELECT *,
           sum(CASE WHEN placeholder THEN 0 ELSE 1 END)
               OVER (PARTITION BY session_id ORDER BY idx ROWS UNBOUNDED PRECEDING) AS run_no
    FROM f
),
run_len AS (
    SELECT session_id, run_no, count(*) FILTER (WHERE placeholder) AS n
    FROM runs GROUP BY session_id, run_no
),
hits AS (
    SELECT r.*, r.placeholder AND l.n >= $min_placeholder_run AS in_run
    FROM runs r JOIN run_len l USING (session_id, run_no)
    WHERE r.blank OR (r.placeholder AND l.n >= $min_placeholder_run)
)
SELECT coalesce(any_value(stream_key), session_id) AS stream_key, session_id,
       min(ts) AS start_ts, max(ts) AS end_ts, count(*) AS n_calls,
       arg_min(call_id, idx) AS first_call_id, arg_max(call_id, idx) AS last_call_id,
       coalesce(sum(cost_usd) FILTER (WHERE in_run), 0) AS wasted_usd,
       list(DISTINCT call_id) FILTER (WHERE in_run) AS wasted_calls,
       coalesce(sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0))
                    FILTER (WHERE in_run), 0) AS wasted_tokens,
       string_agg(DISTINCT cost_basis, ',' ORDER BY cost_basis) FILTER (WHERE in_run) AS cost_basis,
       concat_ws('; ',
           CASE WHEN count(*) FILTER (WHERE blank) > 0
                THEN count(*) FILTER (WHERE blank)
                     || ' empty assistant message(s) saved: a restore of this conversation '
                     || 'will be refused' END,
           CASE WHEN count(*) FILTER (WHERE in_run) > 0
                THEN count(*) FILTER (WHERE in_run)
                     || ' placeholder replies in a row (the model answered nothing)' END
       ) AS summary,
       json_object(
           'first_call_id', arg_min(call_id, idx), 'last_call_id', arg_max(call_id, idx),
           'empty_messages', count(*) FILTER (WHERE blank),
           'placeholder_replies', count(*) FILTER (WHERE in_run),
           'message_indexes', list(idx ORDER BY idx)
       ) AS evidence
FROM hits
GROUP BY session_id
ORDER BY wasted_usd DESC, start_ts
