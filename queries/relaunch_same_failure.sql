-- name: relaunch_same_failure
-- title: The agent relaunched into the same failure, run after run
-- severity: medium
-- params: min_runs=3
--
-- An outer loop (`while :; do claude -p ...; done`, a harness retrying a task) starts the agent
-- again after a run that failed, and the next run fails the same way at once: a usage limit
-- ("5-hour limit reached"), an empty credit balance, a broken configuration. A real log holds
-- 133 relaunches in a row after Claude Code's 5-hour limit, another 18 on "Credit balance is
-- too low". Each run's own verdict is in its log (the runs table: the CLI's is_error and result
-- text, an agent's exit status); no agent guards against its own relaunch, so the anchor is
-- the consecutive-mistake limits of the agents that count failures (Cline and Roo Code stop at
-- 3 consecutive mistakes). Found: min_runs runs in a row in a stream (in their order) that
-- failed with the same result. Refused runs often cost nothing (no model was called), but the
-- loop is real, and with another error each relaunch is paid for. Waste: the calls of the runs
-- after the first.
WITH r AS (
    SELECT stream_key, session_id, seq,
           CASE WHEN is_error OR outcome IN ('error', 'step_limit', 'cost_limit',
                                             'context_limit', 'format_error', 'stuck')
                THEN coalesce(exit_status, '') || '|' || coalesce(result_excerpt, '') END AS k,
           result_excerpt, exit_status
    FROM runs
    WHERE stream_key IN (SELECT stream_key FROM runs GROUP BY stream_key
                         HAVING count(*) >= $min_runs)
),
w AS (
    SELECT *,
           coalesce(k = lag(k) OVER (PARTITION BY stream_key ORDER BY seq, session_id), false)
               AS same,
           row_number() OVER (PARTITION BY stream_key ORDER BY seq, session_id) AS pos
    FROM r
),
islands AS (
    SELECT *,
           sum(CASE WHEN same THEN 0 ELSE 1 END)
               OVER (PARTITION BY stream_key ORDER BY seq, session_id
                     ROWS UNBOUNDED PRECEDING) AS grp
    FROM w
),
storms AS (
    SELECT stream_key, grp, count(*) AS n, min(pos) AS first_pos, max(pos) AS last_pos,
           arg_min(session_id, pos) AS first_session, arg_max(session_id, pos) AS last_session,
           arg_min(seq, pos) AS first_run, arg_max(seq, pos) AS last_run,
           any_value(result_excerpt) AS said, any_value(exit_status) AS status
    FROM islands WHERE k IS NOT NULL
    GROUP BY stream_key, grp
    HAVING count(*) >= $min_runs
),
members AS (
    SELECT s.stream_key, s.grp, i.session_id, i.pos > s.first_pos AS wasted
    FROM storms s
    JOIN islands i ON i.stream_key = s.stream_key AND i.grp = s.grp
),
spent AS (
    SELECT m.stream_key, m.grp,
           count(c.call_id) AS n_calls,
           min(c.ts) AS start_ts, max(c.ts) AS end_ts,
           arg_min(c.call_id, c.seq) AS first_call_id, arg_max(c.call_id, c.seq) AS last_call_id,
           coalesce(sum(c.cost_usd) FILTER (WHERE m.wasted), 0) AS usd,
           coalesce(sum(coalesce(c.input_tokens, 0) + coalesce(c.output_tokens, 0))
                    FILTER (WHERE m.wasted), 0) AS tokens,
           list(c.call_id ORDER BY c.seq) FILTER (WHERE m.wasted AND c.call_id IS NOT NULL)
               AS calls,
           string_agg(DISTINCT c.cost_basis, ',' ORDER BY c.cost_basis) FILTER (WHERE m.wasted)
               AS bases
    FROM members m LEFT JOIN live_calls c ON c.session_id = m.session_id
    GROUP BY m.stream_key, m.grp
)
SELECT s.stream_key, s.first_session AS session_id, p.start_ts, p.end_ts, p.n_calls,
       p.first_call_id, p.last_call_id, p.usd AS wasted_usd, p.tokens AS wasted_tokens,
       p.calls AS wasted_calls, p.bases AS cost_basis,
       s.n || ' runs in a row failed the same way ("'
           || left(coalesce(s.said, s.status, 'no result text'), 60)
           || '"): relaunched ' || (s.n - 1) || ' times into the same failure' AS summary,
       json_object(
           'runs_in_a_row', s.n, 'first_run', s.first_run, 'last_run', s.last_run,
           'first_session', s.first_session, 'last_session', s.last_session,
           'exit_status', s.status, 'result', left(s.said, 200),
           'calls_in_the_runs', p.n_calls
       ) AS evidence
FROM storms s JOIN spent p ON p.stream_key = s.stream_key AND p.grp = s.grp
ORDER BY wasted_usd DESC, s.stream_key, s.first_run
