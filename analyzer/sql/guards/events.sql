-- lf_mem.lf_events: every live call in stream order, with what a guard can key on, the unit
-- numbers of each scope, and what the scoring needs (guards/replay.py, _prepare_events). Reads
-- calls, messages, lf_streams and lf_names (numbers.sql), and lf_outcomes (outcomes.sql),
-- lf_steps (steps.sql) or lf_keys (stream_keys.sql) when a slot names them.
-- One statement: the calls sorted (s), then the order's own columns in layers, each reading
-- the one below in the sort's order through windows over no partition and no order, which
-- DuckDB streams in the order the sort emits the rows (where a stream, a session and a turn
-- begin, the neighbours; then running counts; then positions and unit numbers within the
-- stream), written as they stream out of the sort: no sorted copy and no second pass.
-- Slots: <calls> the calls' own columns carried ("l.x", "t.tool_key", "x.refused"...),
-- <is_bill> a predicate over l.format, <outcomes> the joins of lf_outcomes x and lf_steps y
-- (those needed, or nothing), <columns> the replay's columns (EVENT_COLUMNS carried or
-- derived); <keyed> nothing, or the join of lf_keys followed by the order stated again (a
-- join promises none).
-- A tool call whose arguments the log does not record (tool_args_hash NULL) is keyed
-- '?<session>#<idx>': the same as no other (guards/blindness.py calls its tool_key unknown).
CREATE OR REPLACE TABLE lf_mem.lf_events AS
WITH tools AS (
    SELECT call_id,
           string_agg(tool_name || ':' || coalesce(tool_args_hash, '?' || session_id || '#' || idx), ';'
                      ORDER BY tool_name, tool_args_hash) AS tool_key
    FROM messages WHERE kind = 'tool_call' AND call_id IS NOT NULL
    GROUP BY call_id
),
s AS (
    SELECT s.sk, {{calls}}, sn.id AS sid, tn.id AS tid,
           {{is_bill}} AS is_bill,
           -- where a session (a turn) named as the stream's key meets one not named
           coalesce(l.session_id = l.stream_key, false) AS session_is_key,
           coalesce(coalesce(l.turn_id, l.session_id) = l.stream_key, false)
               AS turn_is_key
    FROM calls l JOIN lf_streams s ON s.stream_key = l.stream_key
    LEFT JOIN tools t ON t.call_id = l.call_id
    {{outcomes}}
    LEFT JOIN lf_names sn ON sn.name = l.session_id
    LEFT JOIN lf_names tn ON tn.name = l.turn_id
    WHERE l.superseded_by IS NULL
    ORDER BY s.sk, l.seq, l.ts, l.call_id),
a AS (
    SELECT *, sk IS DISTINCT FROM lag(sk) OVER () AS new_stream,
           coalesce(lead(sk) OVER () = sk, false) AS has_next,
           lead(input_tokens) OVER () AS lead_in,
           epoch(lead(ts) OVER ()) - epoch(ts) AS lead_gap,
           input_tokens - lag(input_tokens) OVER () AS lag_delta,
           NOT (sid IS NOT DISTINCT FROM lag(sid) OVER ()
                OR (sid IS NULL AND lag(session_is_key) OVER ())
                OR (lag(sid) OVER () IS NULL AND session_is_key))
               AS session_change,
           NOT (turn IS NOT DISTINCT FROM lag(turn) OVER ()
                OR (turn IS NULL AND lag(turn_is_key) OVER ())
                OR (lag(turn) OVER () IS NULL AND turn_is_key)) AS turn_change,
           coalesce(response_kind IN ('tool_call', 'truncated_tool_call'), false)
               OR tool_key IS NOT NULL AS tc,
           coalesce(cost_usd, 0) AS usd
    FROM (SELECT *, coalesce(tid, sid) AS turn FROM s)),
b AS (
    SELECT *, row_number() OVER () AS gi,
           sum(new_stream::INTEGER) OVER r AS n_stream,
           sum((new_stream OR session_change)::INTEGER) OVER r AS n_session,
           sum((new_stream OR turn_change)::INTEGER) OVER r AS n_turn,
           sum(tc::INTEGER) OVER r - tc::INTEGER AS tc_before,
           sum(usd) OVER r AS usd_through
    FROM a WINDOW r AS (ROWS UNBOUNDED PRECEDING)),
o AS (
    SELECT *,
           gi - max(CASE WHEN new_stream THEN gi - 1 END) OVER r AS pos,
           n_stream::BIGINT AS u_stream,
           (n_stream * 16777216
               + (n_session - max(CASE WHEN new_stream THEN n_session - 1 END) OVER r)
           )::BIGINT AS u_session,
           (n_stream * 16777216
               + (n_turn - max(CASE WHEN new_stream THEN n_turn - 1 END) OVER r)
           )::BIGINT AS u_turn,
           (tc_before - max(CASE WHEN new_stream OR turn_change THEN tc_before END)
               OVER r)::BIGINT AS tools_before,
           CASE WHEN has_next THEN lead_in END AS next_in,
           CASE WHEN has_next THEN lead_gap END AS next_gap,
           CASE WHEN NOT new_stream THEN lag_delta END AS prompt_delta
    FROM b WINDOW r AS (ROWS UNBOUNDED PRECEDING))
SELECT {{columns}}, u_stream, u_session, u_turn, sid, parent_session_id,
       usd_through
FROM o
{{keyed}};
