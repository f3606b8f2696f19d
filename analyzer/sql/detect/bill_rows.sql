-- The bucketed bills for `usage bills`: one row per bucket, provider and model key, with its
-- requests, fresh input (cache reads and writes apart), cache writes and reads, output, the
-- cost report's dollars, the usage report's estimate and the formats it came from. In time
-- order, then provider and model. No parameters.
SELECT provider, bucket_start, bucket_end,
       coalesce(min(model) FILTER (WHERE measure = 'usage'), min(model)),
       sum(requests),
       coalesce(sum(greatest(coalesce(input_tokens, 0)
                             - coalesce(cached_input_tokens, 0)
                             - coalesce(cache_write_tokens, 0), 0)), 0),
       coalesce(sum(cache_write_tokens), 0), coalesce(sum(cached_input_tokens), 0),
       coalesce(sum(output_tokens), 0),
       sum(cost_usd) FILTER (WHERE measure = 'cost'),
       sum(cost_estimate_usd) FILTER (WHERE measure = 'usage'),
       list(DISTINCT format ORDER BY format)
FROM bill_buckets GROUP BY provider, bucket_start, bucket_end, model_key
ORDER BY bucket_start, provider, 4 NULLS FIRST;
