-- A usage view's figures per group (every live call once): tokens by ccusage's columns,
-- dollars and calls by cost basis, what placeholder output counts do, times, models and the
-- group's most frequent project, and its machines. Columns are read by position
-- (views/usage.py, _row). Slots: key, the group's key (an expression over live_calls; '(no
-- time)' where NULL), part, the second key (the model or the machine, for a breakdown, or
-- NULL), model, a call's model as a usage view names it. Parameter: tz (when the key counts
-- days in a zone).
SELECT coalesce({{key}}, '(no time)') AS k,
       {{part}} AS m,
       count(*) AS calls,
       coalesce(sum(greatest(coalesce(input_tokens, 0) - coalesce(cached_input_tokens, 0)
                             - coalesce(cache_write_tokens, 0), 0)), 0) AS input,
       coalesce(sum(cache_write_tokens), 0) AS cache_write,
       coalesce(sum(cached_input_tokens), 0) AS cache_read,
       coalesce(sum(output_tokens), 0) AS output,
       coalesce(sum(reasoning_tokens), 0) AS reasoning,
       sum(cost_usd) FILTER (WHERE cost_basis = 'billed') AS billed,
       sum(cost_usd) FILTER (WHERE cost_basis = 'reported') AS reported,
       sum(cost_usd) FILTER (WHERE cost_basis = 'apportioned') AS apportioned,
       sum(cost_usd) FILTER (WHERE cost_basis = 'estimated') AS estimated,
       sum(cost_usd) FILTER (WHERE cost_basis = 'estimated_output') AS estimated_output,
       count(*) FILTER (WHERE cost_usd IS NULL) AS unpriced,
       map_from_entries(list_filter(
           [('billed', count(*) FILTER (WHERE cost_basis = 'billed')),
            ('reported', count(*) FILTER (WHERE cost_basis = 'reported')),
            ('apportioned', count(*) FILTER (WHERE cost_basis = 'apportioned')),
            ('estimated', count(*) FILTER (WHERE cost_basis = 'estimated')),
            ('estimated_output', count(*) FILTER (WHERE cost_basis = 'estimated_output')),
            ('unpriced', count(*) FILTER (WHERE cost_usd IS NULL))],
           lambda e: e[2] > 0)) AS by_basis,
       count(*) FILTER (WHERE cost_basis = 'estimated_output') AS ph_calls,
       coalesce(sum(output_tokens) FILTER (WHERE cost_basis = 'estimated_output'), 0)
           AS ph_output,
       coalesce(sum(output_estimate_tokens) FILTER (WHERE cost_basis = 'estimated_output'), 0)
           AS ph_est,
       coalesce(sum(cost_logged_usd) FILTER (WHERE cost_basis = 'estimated_output'), 0)
           AS ph_logged,
       coalesce(sum(cost_usd) FILTER (WHERE cost_basis = 'estimated_output'), 0) AS ph_usd,
       count(*) FILTER (WHERE cost_basis = 'estimated_output' AND output_estimate_floor)
           AS ph_floors,
       min(ts) AS first_ts, max(ts) AS last_ts,
       list_sort(list(DISTINCT {{model}})) AS models,
       mode(coalesce(project, app)) AS project,
       list_sort(list(DISTINCT coalesce(machine, '(unknown)'))) AS machines
FROM live_calls
GROUP BY ALL;
