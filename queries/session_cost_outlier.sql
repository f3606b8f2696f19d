-- name: session_cost_outlier
-- title: A session that cost far more than its peers
-- severity: low
-- params: factor=10, min_sessions=10, min_usd=5.0
--
-- Not every runaway has a pattern the other detectors know. A session that cost many times the
-- median of the sessions of the same API key (or app, or log format, when there is no key) is
-- worth a look by a person. Found when a session cost at least factor times that median and at
-- least min_usd, among at least min_sessions sessions. A pointer, not a verdict: no waste is
-- claimed.
WITH s AS (
    -- Every session's cost and peer group, in one narrow pass; the rest is read only for the
    -- sessions that stand out.
    SELECT session_id, any_value(stream_key) AS stream_key,
           coalesce(any_value(api_key), any_value(app), any_value(format)) AS peer_group,
           sum(cost_usd) AS usd
    FROM live_calls
    WHERE session_id IS NOT NULL AND cost_usd IS NOT NULL
    GROUP BY session_id
),
g AS (
    SELECT *, median(usd) OVER (PARTITION BY peer_group) AS median_usd,
           count(*) OVER (PARTITION BY peer_group) AS peers
    FROM s
),
outliers AS (
    SELECT * FROM g
    WHERE peers >= $min_sessions AND median_usd > 0 AND usd >= $factor * median_usd
      AND usd >= $min_usd
),
d AS (
    SELECT session_id, min(ts) AS start_ts, max(ts) AS end_ts, count(*) AS n_calls,
           arg_min(call_id, seq) AS first_call_id, arg_max(call_id, seq) AS last_call_id,
           string_agg(DISTINCT cost_basis, ',' ORDER BY cost_basis) AS bases
    FROM live_calls
    WHERE session_id IN (SELECT session_id FROM outliers) AND cost_usd IS NOT NULL
    GROUP BY session_id
)
SELECT stream_key, session_id, start_ts, end_ts, n_calls, first_call_id, last_call_id,
       0 AS wasted_usd, 0 AS wasted_tokens, bases AS cost_basis,
       'session cost $' || format('{:,.2f}', usd) || ', ' || round(usd / median_usd, 1)
           || 'x the median of ' || peers || ' sessions of ' || peer_group AS summary,
       json_object(
           'first_call_id', first_call_id, 'last_call_id', last_call_id,
           'session_usd', usd, 'median_usd', median_usd, 'peer_group', peer_group,
           'peer_sessions', peers, 'calls', n_calls
       ) AS evidence
FROM outliers JOIN d USING (session_id)
ORDER BY usd DESC
