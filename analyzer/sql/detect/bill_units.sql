-- The units of the bucketed bills (one provider's bucket for one model, and for one API key,
-- workspace or project when the calls carry a label that names it), each with its bill and
-- the logged calls that explain it; then the calls no bill row covers, inside a bucket the
-- bill has for their provider (log-only units: under another model's or key's name).
-- A unit's bucket is the bill's own (an hour where the usage report is hourly, a day where it
-- is daily). A cost report's bucket that holds finer usage buckets of the same provider,
-- model and key (Anthropic's and OpenAI's cost reports are daily only) is shared over them in
-- proportion to their tokens at list prices (`apportioned`); one that holds none is a unit of
-- its own. Each call counts in one unit: of those that take it, the finest bucket, a unit of
-- its model before one of all models, of its key before one of all keys.
-- Takes $gateways (formats a gateway bills to the user: not on a provider's bill) and
-- $label (the call label that holds the bill's key); slots {{key}} (the bill's column
-- matched, or NULL) and {{label}} (the call's label, or NULL).
WITH logged AS (
    -- the provider of a logged call: as the log says it, else by its model's name
    SELECT call_id,
           CASE
               WHEN lower(provider) IN ('anthropic', 'openai') THEN lower(provider)
               WHEN lf_model_key(model) LIKE 'claude%' THEN 'anthropic'
               WHEN regexp_matches(lf_model_key(model), '^(gpt|o[1-9]|codex|chatgpt|computer-use)')
                   THEN 'openai'
           END AS provider,
           model, lf_model_key(model) AS mk, ts, cost_usd, cost_basis,
           input_tokens, cached_input_tokens, cache_write_tokens, output_tokens,
           CASE WHEN cost_basis = 'estimated_output' THEN cost_usd - cost_logged_usd END
               AS placeholder_usd,
           {{label}} AS k
    FROM live_calls
    WHERE ts IS NOT NULL AND format NOT IN (SELECT unnest($gateways))
      AND (billing_call_id IS NULL
           OR billing_call_id NOT IN (SELECT call_id FROM calls
                                      WHERE format IN (SELECT unnest($gateways))))
),
keyed AS (
    -- the providers whose calls carry the label: their bills are compared key by key
    SELECT DISTINCT provider FROM logged WHERE k IS NOT NULL
),
bill AS (
    SELECT *, CASE WHEN provider IN (SELECT provider FROM keyed) THEN {{key}} END AS k
    FROM bill_buckets
),
usage AS (
    SELECT provider, bucket_start AS bs, bucket_end AS be, model_key AS mkey, k,
           min(model) AS model,
           sum(cost_estimate_usd) AS estimate,
           count(*) FILTER (WHERE cost_estimate_usd IS NULL
                            AND (coalesce(input_tokens, 0) > 0
                                 OR coalesce(output_tokens, 0) > 0)) AS unpriced_rows,
           sum(input_tokens) AS input, sum(cached_input_tokens) AS cache_read,
           sum(cache_write_tokens) AS cache_write, sum(output_tokens) AS output,
           sum(requests) AS requests
    FROM bill WHERE measure = 'usage'
    GROUP BY ALL
),
cost AS (
    SELECT provider, bucket_start AS bs, bucket_end AS be, model_key AS mkey, k,
           min(model) AS model, sum(cost_usd) AS cost, count(*) AS cost_rows
    FROM bill WHERE measure = 'cost'
    GROUP BY ALL
),
covers AS (
    -- each cost group against the usage groups inside it (same provider and model, keys that
    -- agree): `parts` of them, `whole` their estimate
    SELECT c.provider, c.bs AS cbs, c.be AS cbe, c.mkey, c.k AS ck, c.cost, c.cost_rows,
           u.bs, u.be, u.k AS uk, u.estimate,
           count(*) OVER (PARTITION BY c.provider, c.bs, c.be, c.mkey, c.k) AS parts,
           sum(u.estimate) OVER (PARTITION BY c.provider, c.bs, c.be, c.mkey, c.k) AS whole
    FROM cost c
    JOIN usage u
      ON u.provider = c.provider AND u.mkey IS NOT DISTINCT FROM c.mkey
     AND u.bs >= c.bs AND u.be <= c.be
     AND (c.k IS NULL OR u.k IS NULL OR c.k = u.k)
),
shared AS (
    SELECT * FROM covers WHERE parts = 1 OR whole > 0
),
shares AS (
    SELECT provider, bs, be, mkey, uk AS k,
           sum(CASE WHEN parts = 1 THEN cost
                    ELSE CAST(cost * (coalesce(estimate, 0) / whole) AS DECIMAL(18, 10))
               END) AS cost,
           sum(cost_rows) AS cost_rows,
           bool_or(parts > 1 OR bs <> cbs OR be <> cbe) AS apportioned
    FROM shared
    GROUP BY ALL
),
units AS (
    SELECT u.provider, u.bs, u.be, u.mkey, u.k, u.model, s.cost,
           coalesce(s.cost_rows, 0) AS cost_rows, coalesce(s.apportioned, false) AS apportioned,
           u.estimate, u.unpriced_rows, u.input, u.cache_read, u.cache_write, u.output,
           u.requests
    FROM usage u
    LEFT JOIN shares s
      ON s.provider = u.provider AND s.bs = u.bs AND s.be = u.be
     AND s.mkey IS NOT DISTINCT FROM u.mkey AND s.k IS NOT DISTINCT FROM u.k
    UNION ALL
    -- a cost group with no usage group inside it to share it over: a unit of its own
    SELECT c.provider, c.bs, c.be, c.mkey, c.k, c.model, c.cost, c.cost_rows, false,
           NULL, 0, NULL, NULL, NULL, NULL, NULL
    FROM cost c
    WHERE NOT EXISTS (SELECT 1 FROM shared v
                      WHERE v.provider = c.provider AND v.cbs = c.bs AND v.cbe = c.be
                        AND v.mkey IS NOT DISTINCT FROM c.mkey
                        AND v.ck IS NOT DISTINCT FROM c.k)
),
taken AS (
    -- each call in the one unit that takes it
    SELECT l.call_id, n.provider, n.bs, n.be, n.mkey, n.k
    FROM logged l
    JOIN units n
      ON l.provider = n.provider AND l.ts >= n.bs AND l.ts < n.be
     AND (n.mkey IS NULL OR l.mk = n.mkey)
     AND (n.k IS NULL OR l.k = n.k)
    QUALIFY row_number() OVER (PARTITION BY l.call_id
                               ORDER BY n.be - n.bs, n.mkey NULLS LAST, n.k NULLS LAST,
                                        n.bs) = 1
),
grid AS (
    SELECT DISTINCT provider, bs, be FROM units
),
astray AS (
    -- a call no unit takes, inside a bucket of its provider's bill: the finest such bucket
    SELECT l.call_id, g.provider, g.bs, g.be, l.mk AS mkey, l.k
    FROM logged l
    JOIN grid g ON g.provider = l.provider AND l.ts >= g.bs AND l.ts < g.be
    WHERE l.call_id NOT IN (SELECT call_id FROM taken)
    QUALIFY row_number() OVER (PARTITION BY l.call_id ORDER BY g.be - g.bs, g.bs) = 1
),
placed AS (
    SELECT t.provider, t.bs, t.be, t.mkey, t.k, l.*  EXCLUDE (provider, mk, k)
    FROM (SELECT * FROM taken UNION ALL SELECT * FROM astray) t
    JOIN logged l USING (call_id)
),
everything AS (
    SELECT *, true AS has_bill FROM units
    UNION ALL
    SELECT DISTINCT provider, bs, be, mkey, k, NULL, NULL, 0, false, NULL, 0,
           NULL, NULL, NULL, NULL, NULL, false
    FROM placed p
    WHERE NOT EXISTS (SELECT 1 FROM units n
                      WHERE n.provider = p.provider AND n.bs = p.bs AND n.be = p.be
                        AND n.mkey IS NOT DISTINCT FROM p.mkey
                        AND n.k IS NOT DISTINCT FROM p.k)
)
SELECT e.provider, e.bs, e.be,
       coalesce(e.model, min(p.model)) AS model, e.k, e.has_bill,
       e.cost, e.cost_rows, e.apportioned, e.estimate, e.unpriced_rows,
       e.input, e.cache_read, e.cache_write, e.output, e.requests,
       count(p.call_id) AS calls,
       coalesce(sum(p.cost_usd), 0) AS logged_usd,
       coalesce(sum(p.input_tokens), 0) AS log_input,
       coalesce(sum(p.cached_input_tokens), 0) AS log_cache_read,
       coalesce(sum(p.cache_write_tokens), 0) AS log_cache_write,
       coalesce(sum(p.output_tokens), 0) AS log_output,
       count(p.call_id) FILTER (WHERE p.cost_usd IS NULL) AS unpriced_calls,
       count(p.placeholder_usd) AS placeholder_calls,
       coalesce(sum(p.placeholder_usd), 0) AS placeholder_usd,
       count(p.call_id) FILTER (WHERE p.cost_basis IN ('reported', 'billed')) AS stated_calls,
       count(p.call_id) FILTER (WHERE p.cost_basis LIKE 'estimated%') AS estimated_calls
FROM everything e
LEFT JOIN placed p
  ON p.provider = e.provider AND p.bs = e.bs AND p.be = e.be
 AND p.mkey IS NOT DISTINCT FROM e.mkey AND p.k IS NOT DISTINCT FROM e.k
GROUP BY e.provider, e.bs, e.be, e.mkey, e.k, e.model, e.has_bill, e.cost, e.cost_rows,
         e.apportioned, e.estimate, e.unpriced_rows, e.input, e.cache_read, e.cache_write,
         e.output, e.requests
ORDER BY e.bs, e.provider, 4 NULLS FIRST, e.k NULLS FIRST;
