-- lf_steps: each live call that called tools as a step of the no_progress detector
-- (queries/no_progress.sql), for the guard replay's step_key, step_errors, step_failed and
-- stale (guards/replay.py, _prepare_events; the live guard derives stale by the same rule,
-- guards/guard.py, _Steps). No parameters; reads calls and messages.
-- step_key - its (action, result) pairs, each compared on what it means: a tool call's
-- meaning_key (else tool:arguments hash; a call whose arguments the log does not record is
-- '?<session>#<idx>', the same as no other) '=' its result's (else the result's hash, else '?'),
-- distinct, sorted, ';'-joined; step_errors - the errors its results said (their keys,
-- distinct, sorted, ';'-joined; NULL when none did); step_failed - every tool call it made
-- got an error back (with a key); stale - in its stream and session (the ids), in the
-- replay's order (seq, ts, call_id): its step_key comes for the 3rd time or later, or it
-- failed and every error it got an earlier call of the session had got.
CREATE OR REPLACE TEMP TABLE lf_steps AS
WITH results AS (
    SELECT session_id, tool_use_id, bool_or(coalesce(is_error, false)) AS err,
           min(coalesce(meaning_key, tool_result_hash)) AS got
    FROM messages
    WHERE kind = 'tool_result' AND tool_use_id IS NOT NULL
    GROUP BY session_id, tool_use_id
),
acts AS (
    SELECT m.call_id,
           CASE WHEN m.tool_args_hash IS NULL THEN '?' || m.session_id || '#' || m.idx
                ELSE coalesce(m.meaning_key,
                              coalesce(m.tool_name, '') || ':' || m.tool_args_hash) END
               || '=' || coalesce(r.got, '?') AS pair,
           r.got, coalesce(r.err, false) AS err
    FROM messages m
    LEFT JOIN results r ON r.session_id = m.session_id AND r.tool_use_id = m.tool_use_id
    WHERE m.kind = 'tool_call' AND m.call_id IS NOT NULL
),
steps AS (
    SELECT call_id,
           string_agg(DISTINCT pair, ';' ORDER BY pair) AS step_key,
           string_agg(DISTINCT got, ';' ORDER BY got) FILTER (WHERE err) AS step_errors,
           bool_and(err AND got IS NOT NULL) AS step_failed
    FROM acts
    GROUP BY call_id
),
ordered AS (
    SELECT s.*, l.stream_key, l.session_id,
           row_number() OVER (PARTITION BY l.stream_key, l.session_id
                              ORDER BY l.seq, l.ts, l.call_id) AS n,
           row_number() OVER (PARTITION BY l.stream_key, l.session_id, s.step_key
                              ORDER BY l.seq, l.ts, l.call_id) AS times
    FROM steps s JOIN calls l ON l.call_id = s.call_id
    WHERE l.superseded_by IS NULL
),
errs AS (
    -- each error's keys and the step that first got it, per stream and session
    SELECT DISTINCT o.stream_key, o.session_id, o.n, a.got
    FROM acts a JOIN ordered o ON o.call_id = a.call_id
    WHERE a.err AND a.got IS NOT NULL
),
firsts AS (
    SELECT stream_key, session_id, got, min(n) AS first_n
    FROM errs GROUP BY stream_key, session_id, got
),
again AS (
    -- a failed step: whether every error it got was got before it
    SELECT e.stream_key, e.session_id, e.n, bool_and(f.first_n < e.n) AS seen
    FROM errs e
    JOIN firsts f ON f.stream_key = e.stream_key
                 AND f.session_id IS NOT DISTINCT FROM e.session_id AND f.got = e.got
    GROUP BY e.stream_key, e.session_id, e.n
)
SELECT o.call_id, o.step_key, o.step_errors, o.step_failed,
       o.times >= 3 OR (o.step_failed AND coalesce(g.seen, false)) AS stale
FROM ordered o
LEFT JOIN again g ON g.stream_key = o.stream_key
                 AND g.session_id IS NOT DISTINCT FROM o.session_id AND g.n = o.n;
