-- An OpenRouter export read by DuckDB's CSV reader into lf_or_typed: a row per record, in the
-- file's order (a row's rowid says where it was), with its typed values and why it cannot
-- load (reject_reason, NULL when it can: the first failing check, in the order below); the
-- record's text is kept, as excerpt, for a reject only. What the reader refuses goes to its
-- own table, lf_or_rej.
-- Parameters: $path (the file), $max_tokens and $max_usd (a count or an amount at or above
-- them is a broken value). Slots, built from the header by analyzer.formats.bills.openrouter_csv:
-- columns (the reader's text columns c0..cN), delim and compression (quoted), limit (a line
-- limit above the longest record, or nothing: the reader's own), cleaned (each cN without
-- surrounding blanks, empty as NULL), named (each known column as in_<column>, NULL when the
-- file lacks it), export_time and other_times (a time without a zone read in the export's
-- layout or in the others, in the input zone, as UTC), row_text (the values joined by commas).
CREATE TEMP TABLE lf_or_typed AS
SELECT generation_id, ts, model, provider, variant, user_id, api_key, app, finish_raw,
       finish_norm, is_header,
       tokens_prompt_d, tokens_completion_d, tokens_reasoning_d, tokens_cached_d,
       cost_total_d, cost_web_search_d, cost_cache_d, cost_file_processing_d,
       byok_usage_inference_d, generation_time_ms_d, time_to_first_token_ms_d,
       cancelled, streamed, api_key_disabled,
       reject_reason,
       CASE WHEN reject_reason IS NOT NULL THEN left({{row_text}}, 300) END AS excerpt
FROM (
    SELECT *,
           CASE WHEN is_header THEN NULL ELSE CASE
               WHEN generation_id IS NULL THEN 'generation_id is empty'
               WHEN created_at_raw IS NULL THEN 'created_at is empty'
               WHEN ts IS NULL
                   THEN 'created_at: cannot read "' || left(created_at_raw, 60)
                        || '" as a date-time'
               WHEN model IS NULL THEN 'model_permaslug is empty'
               -- token counts: whole, not negative, below $max_tokens
               WHEN tokens_prompt_raw IS NULL THEN 'tokens_prompt is empty'
               WHEN tokens_prompt_raw IS NOT NULL
                    AND (tokens_prompt_d IS NULL OR isnan(tokens_prompt_d)
                         OR isinf(tokens_prompt_d) OR tokens_prompt_d < 0
                         OR tokens_prompt_d <> floor(tokens_prompt_d)
                         OR tokens_prompt_d >= $max_tokens)
                   THEN 'tokens_prompt: "' || left(tokens_prompt_raw, 60)
                        || '" is not a whole number of tokens'
               WHEN tokens_completion_raw IS NULL THEN 'tokens_completion is empty'
               WHEN tokens_completion_raw IS NOT NULL
                    AND (tokens_completion_d IS NULL OR isnan(tokens_completion_d)
                         OR isinf(tokens_completion_d) OR tokens_completion_d < 0
                         OR tokens_completion_d <> floor(tokens_completion_d)
                         OR tokens_completion_d >= $max_tokens)
                   THEN 'tokens_completion: "' || left(tokens_completion_raw, 60)
                        || '" is not a whole number of tokens'
               WHEN tokens_reasoning_raw IS NOT NULL
                    AND (tokens_reasoning_d IS NULL OR isnan(tokens_reasoning_d)
                         OR isinf(tokens_reasoning_d) OR tokens_reasoning_d < 0
                         OR tokens_reasoning_d <> floor(tokens_reasoning_d)
                         OR tokens_reasoning_d >= $max_tokens)
                   THEN 'tokens_reasoning: "' || left(tokens_reasoning_raw, 60)
                        || '" is not a whole number of tokens'
               WHEN tokens_cached_raw IS NOT NULL
                    AND (tokens_cached_d IS NULL OR isnan(tokens_cached_d)
                         OR isinf(tokens_cached_d) OR tokens_cached_d < 0
                         OR tokens_cached_d <> floor(tokens_cached_d)
                         OR tokens_cached_d >= $max_tokens)
                   THEN 'tokens_cached: "' || left(tokens_cached_raw, 60)
                        || '" is not a whole number of tokens'
               -- dollars: below $max_usd either way, and not negative but for cost_cache
               WHEN cost_total_raw IS NOT NULL
                    AND (cost_total_d IS NULL OR isnan(cost_total_d) OR isinf(cost_total_d)
                         OR abs(cost_total_d) >= $max_usd OR cost_total_d < 0)
                   THEN 'cost_total: "' || left(cost_total_raw, 60)
                        || '" is not a non-negative amount of USD'
               WHEN cost_web_search_raw IS NOT NULL
                    AND (cost_web_search_d IS NULL OR isnan(cost_web_search_d)
                         OR isinf(cost_web_search_d) OR abs(cost_web_search_d) >= $max_usd
                         OR cost_web_search_d < 0)
                   THEN 'cost_web_search: "' || left(cost_web_search_raw, 60)
                        || '" is not a non-negative amount of USD'
               WHEN cost_cache_raw IS NOT NULL
                    AND (cost_cache_d IS NULL OR isnan(cost_cache_d) OR isinf(cost_cache_d)
                         OR abs(cost_cache_d) >= $max_usd)
                   THEN 'cost_cache: "' || left(cost_cache_raw, 60)
                        || '" is not an amount of USD'
               WHEN cost_file_processing_raw IS NOT NULL
                    AND (cost_file_processing_d IS NULL OR isnan(cost_file_processing_d)
                         OR isinf(cost_file_processing_d)
                         OR abs(cost_file_processing_d) >= $max_usd
                         OR cost_file_processing_d < 0)
                   THEN 'cost_file_processing: "' || left(cost_file_processing_raw, 60)
                        || '" is not a non-negative amount of USD'
               WHEN byok_usage_inference_raw IS NOT NULL
                    AND (byok_usage_inference_d IS NULL OR isnan(byok_usage_inference_d)
                         OR isinf(byok_usage_inference_d)
                         OR abs(byok_usage_inference_d) >= $max_usd
                         OR byok_usage_inference_d < 0)
                   THEN 'byok_usage_inference: "' || left(byok_usage_inference_raw, 60)
                        || '" is not a non-negative amount of USD'
               -- durations: not negative
               WHEN generation_time_ms_raw IS NOT NULL
                    AND (generation_time_ms_d IS NULL OR isnan(generation_time_ms_d)
                         OR isinf(generation_time_ms_d) OR generation_time_ms_d < 0)
                   THEN 'generation_time_ms: "' || left(generation_time_ms_raw, 60)
                        || '" is not a duration in ms'
               WHEN time_to_first_token_ms_raw IS NOT NULL
                    AND (time_to_first_token_ms_d IS NULL OR isnan(time_to_first_token_ms_d)
                         OR isinf(time_to_first_token_ms_d) OR time_to_first_token_ms_d < 0)
                   THEN 'time_to_first_token_ms: "' || left(time_to_first_token_ms_raw, 60)
                        || '" is not a duration in ms'
               -- flags
               WHEN cancelled_raw IS NOT NULL AND cancelled IS NULL
                   THEN 'cancelled: "' || left(cancelled_raw, 60) || '" is not true or false'
               WHEN streamed_raw IS NOT NULL AND streamed IS NULL
                   THEN 'streamed: "' || left(streamed_raw, 60) || '" is not true or false'
               WHEN api_key_disabled_raw IS NOT NULL AND api_key_disabled IS NULL
                   THEN 'api_key_disabled: "' || left(api_key_disabled_raw, 60)
                        || '" is not true or false'
           END END AS reject_reason
    FROM (
        SELECT *,
               in_generation_id AS generation_id,
               in_created_at AS created_at_raw,
               -- The export's own layout first (cheap); then an explicit zone or offset (taken
               -- at its word), epoch seconds (UTC) and the other layouts. COALESCE evaluates a
               -- branch only for the rows the earlier ones left NULL.
               coalesce(
                   {{export_time}},
                   CASE WHEN regexp_matches(in_created_at, '(Z|[+-]\d\d:?\d\d)$')
                            THEN TRY_CAST(in_created_at AS TIMESTAMPTZ)::TIMESTAMP
                        WHEN regexp_matches(in_created_at, '^\d{9,10}(\.\d+)?$')
                            THEN to_timestamp(TRY_CAST(in_created_at AS DOUBLE))::TIMESTAMP
                        ELSE {{other_times}} END) AS ts,
               in_model_permaslug AS model,
               in_provider_name AS provider,
               in_variant AS variant,
               in_user AS user_id,
               in_api_key_name AS api_key,
               in_app_name AS app,
               in_finish_reason_raw AS finish_raw,
               in_finish_reason_normalized AS finish_norm,
               in_tokens_prompt AS tokens_prompt_raw,
               TRY_CAST(in_tokens_prompt AS DOUBLE) AS tokens_prompt_d,
               in_tokens_completion AS tokens_completion_raw,
               TRY_CAST(in_tokens_completion AS DOUBLE) AS tokens_completion_d,
               in_tokens_reasoning AS tokens_reasoning_raw,
               TRY_CAST(in_tokens_reasoning AS DOUBLE) AS tokens_reasoning_d,
               in_tokens_cached AS tokens_cached_raw,
               TRY_CAST(in_tokens_cached AS DOUBLE) AS tokens_cached_d,
               in_cost_total AS cost_total_raw,
               TRY_CAST(in_cost_total AS DOUBLE) AS cost_total_d,
               in_cost_web_search AS cost_web_search_raw,
               TRY_CAST(in_cost_web_search AS DOUBLE) AS cost_web_search_d,
               in_cost_cache AS cost_cache_raw,
               TRY_CAST(in_cost_cache AS DOUBLE) AS cost_cache_d,
               in_cost_file_processing AS cost_file_processing_raw,
               TRY_CAST(in_cost_file_processing AS DOUBLE) AS cost_file_processing_d,
               in_byok_usage_inference AS byok_usage_inference_raw,
               TRY_CAST(in_byok_usage_inference AS DOUBLE) AS byok_usage_inference_d,
               in_generation_time_ms AS generation_time_ms_raw,
               TRY_CAST(in_generation_time_ms AS DOUBLE) AS generation_time_ms_d,
               in_time_to_first_token_ms AS time_to_first_token_ms_raw,
               TRY_CAST(in_time_to_first_token_ms AS DOUBLE) AS time_to_first_token_ms_d,
               in_cancelled AS cancelled_raw,
               TRY_CAST(in_cancelled AS BOOLEAN) AS cancelled,
               in_streamed AS streamed_raw,
               TRY_CAST(in_streamed AS BOOLEAN) AS streamed,
               in_api_key_disabled AS api_key_disabled_raw,
               TRY_CAST(in_api_key_disabled AS BOOLEAN) AS api_key_disabled,
               coalesce(lower(in_generation_id) = 'generation_id'
                        OR lower(in_created_at) = 'created_at', false) AS is_header
        FROM (
            SELECT *, {{named}}
            FROM (
                SELECT {{cleaned}}
                FROM read_csv($path,
                    columns = {{columns}}, header = true, auto_detect = false,
                    delim = {{delim}}, quote = '"', escape = '"',
                    compression = {{compression}}, null_padding = false,
                    store_rejects = true, rejects_table = 'lf_or_rej',
                    rejects_scan = 'lf_or_rej_scan'{{limit}})
            )
        )
    )
);
