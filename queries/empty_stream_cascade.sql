-- name: empty_stream_cascade
-- title: Empty 200 stream, then every request refused
-- severity: high
-- params: max_cascade_gap_seconds=3600
--
-- The server answers 200 OK with stream headers and then nothing: no events, no content, no
-- tool call, no end marker. A client that saves the empty assistant message makes every later
-- request invalid, and the provider refuses each one with a 4xx until the session is reset
-- (seed 002: devstral-small behind a corporate gateway, then cascading 400s). Found in logs
-- that record the stream (NEXUS3's stream_complete): a 2xx call with zero events (or no
-- content, no tool call and no end marker), followed in the same session by 4xx calls, each
-- within max_cascade_gap_seconds of the previous. Waste: the empty call and the refused calls
-- after it (a refused call may carry no price; the count is the evidence).
WITH empty AS (
    SELECT call_id, stream_key, session_id, seq, ts, http_status, event_count, content_chars,
           tool_call_count, received_done, response_kind, cost_usd, cost_basis,
           input_tokens, output_tokens
    FROM live_calls
    WHERE coalesce(http_status, 200) BETWEEN 200 AND 299
      AND (event_count = 0
           OR (event_count IS NOT NULL AND coalesce(content_chars, 0) = 0
               AND coalesce(tool_call_count, 0) = 0 AND NOT coalesce(received_done, false)))
),
c AS (
    -- Only the streams that hold an empty stream can hold its cascade.
    SELECT call_id, stream_key, session_id, seq, ts, http_status, event_count, content_chars,
           tool_call_count, received_done, response_kind, cost_usd, cost_basis,
           input_tokens, output_tokens
    FROM live_calls
    WHERE stream_key IN (SELECT stream_key FROM empty)
),
after AS (
    -- The calls that follow each empty one, numbered; a cascade is the unbroken 4xx prefix.
    SELECT e.call_id AS empty_id, c.*,
           row_number() OVER (PARTITION BY e.call_id ORDER BY c.seq, c.ts, c.call_id) AS k,
           epoch(c.ts) - epoch(lag(c.ts, 1, e.ts) OVER (PARTITION BY e.call_id
                                                         ORDER BY c.seq, c.ts, c.call_id)) AS gap
    FROM empty e JOIN c
      ON c.stream_key = e.stream_key
     AND c.session_id IS NOT DISTINCT FROM e.session_id
     AND (c.seq > e.seq OR (c.seq = e.seq AND c.ts > e.ts))
),
broken AS (
    SELECT empty_id, min(k) AS first_ok
    FROM after
    WHERE NOT (coalesce(http_status, 0) BETWEEN 400 AND 499)
       OR coalesce(gap, 0) > $max_cascade_gap_seconds
    GROUP BY empty_id
),
cascade AS (
    SELECT a.* FROM after a LEFT JOIN broken b USING (empty_id)
    WHERE a.k < coalesce(b.first_ok, 1e18)
),
incident AS (
    SELECT e.call_id AS empty_id, e.stream_key, e.session_id, e.ts AS start_ts,
           coalesce(max(x.ts), e.ts) AS end_ts,
           1 + count(x.call_id) AS n_calls,
           e.call_id AS first_call_id,
           coalesce(arg_max(x.call_id, x.k), e.call_id) AS last_call_id,
           coalesce(e.cost_usd, 0) + coalesce(sum(x.cost_usd), 0) AS wasted_usd,
           list_prepend(e.call_id, coalesce(list(x.call_id ORDER BY x.k)
                                                FILTER (WHERE x.call_id IS NOT NULL), []))
               AS wasted_calls,
           coalesce(e.input_tokens, 0) + coalesce(e.output_tokens, 0)
               + coalesce(sum(x.input_tokens), 0) AS wasted_tokens,
           (e.cost_usd IS NOT NULL)::INT + count(x.cost_usd) AS priced,
           count(x.call_id) AS refused,
           list(DISTINCT x.http_status) AS statuses,
           any_value(e.event_count) AS events, any_value(e.received_done) AS done,
           any_value(e.cost_basis) AS basis
    FROM empty e LEFT JOIN cascade x ON x.empty_id = e.call_id
    GROUP BY e.call_id, e.stream_key, e.session_id, e.ts, e.cost_usd, e.input_tokens,
             e.output_tokens
)
SELECT stream_key, session_id, start_ts, end_ts, n_calls, first_call_id, last_call_id,
       wasted_usd, wasted_tokens, wasted_calls,
       CASE WHEN priced = 0 THEN NULL WHEN priced < n_calls THEN 'partial:' || coalesce(basis, '')
            ELSE basis END AS cost_basis,
       'a 200 stream arrived empty (' || coalesce(events, 0) || ' events, no [DONE])'
           || CASE WHEN refused > 0 THEN ', then ' || refused || ' requests refused ('
                   || array_to_string(statuses, ', ') || ')' ELSE '' END AS summary,
       json_object(
           'first_call_id', first_call_id, 'last_call_id', last_call_id,
           'empty_call_id', empty_id, 'event_count', events, 'received_done', done,
           'refused_calls', refused, 'http_statuses', statuses
       ) AS evidence
FROM incident
ORDER BY start_ts
