-- The units of the bucketed bills (one provider's bucket for one model), each with its bill
-- (the cost report's dollars and records, the usage report's estimate, tokens and requests)
-- and the logged calls that explain it: the live calls of that provider, model key and bucket
-- that the provider itself billed (not those of a gateway that bills the user: $gateways, a
-- list of formats). In time order, then provider and model.
WITH bill AS (
    SELECT provider, bucket_start, bucket_end, model_key,
           coalesce(min(model) FILTER (WHERE measure = 'usage'), min(model)) AS model,
           sum(cost_usd) FILTER (WHERE measure = 'cost') AS cost,
           count(*) FILTER (WHERE measure = 'cost') AS cost_rows,
           sum(cost_estimate_usd) FILTER (WHERE measure = 'usage') AS estimate,
           count(*) FILTER (WHERE measure = 'usage' AND cost_estimate_usd IS NULL
                            AND (coalesce(input_tokens, 0) > 0
                                 OR coalesce(output_tokens, 0) > 0)) AS unpriced_rows,
           sum(input_tokens) FILTER (WHERE measure = 'usage') AS input,
           sum(output_tokens) FILTER (WHERE measure = 'usage') AS output,
           sum(requests) FILTER (WHERE measure = 'usage') AS requests
    FROM bill_buckets
    GROUP BY ALL
),
logged AS (
    -- the provider of a logged call: as the log says it, else by its model's name
    SELECT CASE
               WHEN lower(provider) IN ('anthropic', 'openai') THEN lower(provider)
               WHEN lf_model_key(model) LIKE 'claude%' THEN 'anthropic'
               WHEN regexp_matches(lf_model_key(model), '^(gpt|o[1-9]|codex|chatgpt|computer-use)')
                   THEN 'openai'
           END AS provider,
           lf_model_key(model) AS mk, ts, cost_usd,
           input_tokens, output_tokens,
           CASE WHEN cost_basis = 'estimated_output' THEN cost_usd - cost_logged_usd END
               AS placeholder_usd
    FROM live_calls
    WHERE ts IS NOT NULL AND format NOT IN (SELECT unnest($gateways))
      AND (billing_call_id IS NULL
           OR billing_call_id NOT IN (SELECT call_id FROM calls
                                      WHERE format IN (SELECT unnest($gateways))))
)
SELECT b.provider, b.bucket_start, b.bucket_end, b.model,
       b.cost, b.cost_rows, b.estimate, b.unpriced_rows, b.input, b.output, b.requests,
       count(l.ts) AS calls,
       coalesce(sum(l.cost_usd), 0) AS logged_usd,
       coalesce(sum(l.input_tokens), 0) AS log_input,
       coalesce(sum(l.output_tokens), 0) AS log_output,
       count(l.ts) FILTER (WHERE l.cost_usd IS NULL) AS unpriced_calls,
       count(l.placeholder_usd) AS placeholder_calls,
       coalesce(sum(l.placeholder_usd), 0) AS placeholder_usd
FROM bill b
LEFT JOIN logged l
  ON l.provider = b.provider AND l.ts >= b.bucket_start AND l.ts < b.bucket_end
 AND (b.model_key IS NULL OR l.mk = b.model_key)
GROUP BY ALL
ORDER BY b.bucket_start, b.provider, b.model NULLS FIRST;
