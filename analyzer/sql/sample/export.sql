-- The sample's billing export: the generated Parquet parts (parameter parts: their paths) written
-- as OpenRouter's 24-column CSV to {{csv}} (a path the code quoted), in time order, the rows of
-- lo <= ts_ms < hi (parameters lo and hi: NULL for no bound), with the header line when
-- {{header}} is true (the first slice of the file). Money is generated in nano-dollars and
-- written as the export writes dollars: plain decimals, no trailing zeros (lf_sample_usd).
CREATE OR REPLACE TEMP MACRO lf_sample_usd(n) AS CASE WHEN n = 0 THEN '0' ELSE
    (CASE WHEN n < 0 THEN '-' ELSE '' END) ||
    rtrim(rtrim(printf('%d.%09d', abs(n) // 1000000000, abs(n) % 1000000000), '0'), '.')
END;
COPY (
    SELECT
        'gen-' || (ts_ms // 1000)::VARCHAR || '-' || id_suffix AS generation_id,
        strftime(epoch_ms(ts_ms), '%Y-%m-%d %H:%M:%S.%g') AS created_at,
        lf_sample_usd(cost_nano) AS cost_total,
        '0' AS cost_web_search,
        lf_sample_usd(cost_cache_nano) AS cost_cache,
        '0' AS cost_file_processing,
        '0' AS byok_usage_inference,
        tokens_prompt, tokens_completion, tokens_reasoning, tokens_cached,
        model AS model_permaslug,
        provider AS provider_name,
        variant, cancelled, streamed, "user",
        finish_raw AS finish_reason_raw,
        finish_norm AS finish_reason_normalized,
        gen_ms AS generation_time_ms,
        ttft_ms AS time_to_first_token_ms,
        false AS api_key_disabled,
        api_key AS api_key_name,
        app AS app_name
    FROM read_parquet($parts)
    WHERE ($lo IS NULL OR ts_ms >= $lo) AND ($hi IS NULL OR ts_ms < $hi)
    ORDER BY ts_ms, id_suffix
) TO '{{csv}}' (HEADER {{header}}, DELIMITER ',');
