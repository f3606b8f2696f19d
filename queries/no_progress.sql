-- name: no_progress
-- title: Calls that change nothing, whatever their shape
-- severity: medium
-- params: window=8, min_stale=7, repeats=3, marginal_run=3
-- general: true
--
-- An agent loops when it keeps paying for calls that change nothing: what it did and what came
-- back stop being new. Each such call re-sends the whole context, so it costs as much as one
-- that makes progress. The named detectors find the shapes they were written for (the same call
-- in a row, the same error from rewritten actions, refusals in a row); this one finds any shape
-- by that definition. A step is a model call that called tools: its pairs (the action, the
-- result), each compared on what it means (ingest masks times, durations, numbers, ids, hashes,
-- temporary names and spacing: the same command on another line number, the same output with
-- other timings, are the same), and a result that says it failed is an error whatever its exit
-- status said. A step is stale when its pairs come for the repeats-th time in the session, or
-- when every result it got was an error the session had already got (from any action: the error
-- is the observation, so a rewritten action that fails the same way learned nothing). A pair
-- seen once before is not yet stale: re-running a check after a change is how work is verified,
-- and the agents' own guards let a repeat through (opencode stops the 3rd identical call,
-- OpenHands an alternation repeated 3 times, Gemini CLI the 5th: guards.md). A loop is a stretch
-- where at least min_stale of window steps in a row are stale: near-zero novelty, one new step
-- in eight, so a loop may vary a little while healthy work, whose new steps are most of any
-- eight, stays out (no window of 7 stale in 8 on the 40 healthy real runs, the healthy runs
-- beside the labelled loops, or more-formats; the labelled loops that are not format errors or
-- relaunches have windows of 8 stale in 8). Refusals and plain replies are not steps
-- (format_error_loop and the others judge them). Waste: the stale calls of the stretch. A run
-- of marginal_run stale steps in a row outside any loop is reported as low severity, never as
-- waste: three repeats are what agents still tolerate.
-- (A tool call whose arguments the log does not record, tool_args_hash NULL, is the same as
-- no other: '?<session>#<idx>'.)
WITH results AS (
    SELECT session_id, tool_use_id, bool_or(coalesce(is_error, false)) AS err,
           min(coalesce(meaning_key, tool_result_hash)) AS got
    FROM messages
    WHERE kind = 'tool_result' AND tool_use_id IS NOT NULL
    GROUP BY session_id, tool_use_id
),
acts AS (
    SELECT m.session_id, m.call_id, m.idx, m.tool_name,
           CASE WHEN m.tool_args_hash IS NULL THEN '?' || m.session_id || '#' || m.idx
                ELSE coalesce(m.meaning_key,
                              coalesce(m.tool_name, '') || ':' || m.tool_args_hash) END || '='
               || coalesce(r.got, '?') AS pair,
           r.got, coalesce(r.err, false) AS err
    FROM messages m
    LEFT JOIN results r ON r.session_id = m.session_id AND r.tool_use_id = m.tool_use_id
    WHERE m.kind = 'tool_call' AND m.call_id IS NOT NULL
),
errs AS (
    -- the call that first got each error of a session
    SELECT session_id, got, arg_min(call_id, idx) AS first_call
    FROM acts WHERE err AND got IS NOT NULL
    GROUP BY session_id, got
),
steps AS (
    SELECT a.session_id, a.call_id, min(a.idx) AS idx,
           string_agg(DISTINCT a.pair, ';' ORDER BY a.pair) AS k,
           bool_and(a.err AND e.first_call IS NOT NULL AND e.first_call <> a.call_id)
               AS error_again,
           bool_or(a.err) AS any_error,
           string_agg(DISTINCT a.tool_name, ', ' ORDER BY a.tool_name) AS tools
    FROM acts a
    LEFT JOIN errs e ON e.session_id = a.session_id AND e.got = a.got AND a.err
    GROUP BY a.session_id, a.call_id
),
seq AS (
    SELECT session_id, call_id, idx, k, tools, any_error,
           (row_number() OVER (PARTITION BY session_id, k ORDER BY idx, call_id) >= $repeats
            OR error_again) AS stale,
           row_number() OVER (PARTITION BY session_id ORDER BY idx, call_id) AS pos
    FROM steps
),
running AS (
    SELECT *,
           sum(CASE WHEN stale THEN 1 ELSE 0 END)
               OVER (PARTITION BY session_id ORDER BY pos ROWS UNBOUNDED PRECEDING) AS stale_through
    FROM seq
),
stuck AS (
    -- the last step of each window of `window` steps with at least `min_stale` stale
    SELECT r.session_id, r.pos
    FROM running r
    LEFT JOIN running b ON b.session_id = r.session_id AND b.pos = r.pos - $window
    WHERE r.pos >= $window AND r.stale_through - coalesce(b.stale_through, 0) >= $min_stale
),
covered AS (
    SELECT DISTINCT r.session_id, r.pos
    FROM stuck s
    JOIN running r ON r.session_id = s.session_id
                  AND r.pos BETWEEN s.pos - $window + 1 AND s.pos
),
stretches AS (
    SELECT session_id, pos, pos - row_number() OVER (PARTITION BY session_id ORDER BY pos) AS grp
    FROM covered
),
bounds AS (
    -- a loop runs from its first stale step to its last
    SELECT t.session_id, t.grp, min(r.pos) AS first_pos, max(r.pos) AS last_pos
    FROM stretches t
    JOIN running r ON r.session_id = t.session_id AND r.pos = t.pos AND r.stale
    GROUP BY t.session_id, t.grp
),
stale_runs AS (
    -- stale steps in a row, for the marginal runs outside any loop
    SELECT session_id, min(pos) AS first_pos, max(pos) AS last_pos
    FROM (SELECT session_id, pos, stale,
                 pos - row_number() OVER (PARTITION BY session_id, stale ORDER BY pos) AS grp
          FROM running)
    WHERE stale
    GROUP BY session_id, grp
    HAVING count(*) >= $marginal_run
),
marginal AS (
    SELECT m.session_id, m.first_pos, m.last_pos
    FROM stale_runs m
    WHERE NOT EXISTS (SELECT 1 FROM bounds b
                      WHERE b.session_id = m.session_id
                        AND m.first_pos <= b.last_pos AND b.first_pos <= m.last_pos)
),
spans AS (
    SELECT session_id, first_pos, last_pos, true AS loop FROM bounds
    UNION ALL
    SELECT session_id, first_pos, last_pos, false FROM marginal
),
members AS (
    SELECT p.session_id, p.first_pos, p.last_pos, p.loop, r.pos, r.call_id, r.stale, r.k,
           r.tools, r.any_error,
           c.stream_key, c.ts, c.seq, c.cost_usd, c.cost_basis,
           coalesce(c.input_tokens, 0) + coalesce(c.output_tokens, 0) AS tokens
    FROM spans p
    JOIN running r ON r.session_id = p.session_id AND r.pos BETWEEN p.first_pos AND p.last_pos
    JOIN live_calls c ON c.call_id = r.call_id
)
SELECT any_value(stream_key) AS stream_key, session_id,
       min(ts) AS start_ts, max(ts) AS end_ts, count(*) AS n_calls,
       arg_min(call_id, pos) AS first_call_id, arg_max(call_id, pos) AS last_call_id,
       CASE WHEN any_value(loop)
            THEN coalesce(sum(cost_usd) FILTER (WHERE stale), 0) ELSE 0 END AS wasted_usd,
       CASE WHEN any_value(loop)
            THEN coalesce(sum(tokens) FILTER (WHERE stale), 0) ELSE 0 END AS wasted_tokens,
       CASE WHEN any_value(loop)
            THEN list(call_id ORDER BY pos) FILTER (WHERE stale) END AS wasted_calls,
       string_agg(DISTINCT cost_basis, ',' ORDER BY cost_basis) FILTER (WHERE stale)
           AS cost_basis,
       CASE WHEN any_value(loop) THEN 'medium' ELSE 'low' END AS severity,
       count(*) FILTER (WHERE stale) || ' of ' || count(*)
           || ' tool-calling steps in a row changed nothing ('
           || count(DISTINCT k) FILTER (WHERE stale) || ' action and result pairs seen before'
           || CASE WHEN bool_or(stale AND any_error) THEN ', errors the session had got before'
                   ELSE '' END
           || '; ' || string_agg(DISTINCT tools, ', ' ORDER BY tools) || ')'
           || CASE WHEN any_value(loop) THEN '' ELSE ': a short run, not priced as waste' END
           AS summary,
       json_object(
           'first_call_id', arg_min(call_id, pos), 'last_call_id', arg_max(call_id, pos),
           'steps', count(*), 'stale_steps', count(*) FILTER (WHERE stale),
           'new_steps', count(*) FILTER (WHERE NOT stale),
           'repeated_pairs', count(DISTINCT k) FILTER (WHERE stale),
           'tools', string_agg(DISTINCT tools, ', ' ORDER BY tools),
           'first_seq', min(seq), 'last_seq', max(seq),
           'window', $window, 'min_stale', $min_stale, 'repeats', $repeats
       ) AS evidence
FROM members
GROUP BY session_id, first_pos
ORDER BY wasted_usd DESC, start_ts
