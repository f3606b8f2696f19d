-- The rows that load into calls: each typed row beside its place in its stream (lf_or_typed
-- POSITIONAL JOIN lf_or_seq, both in rowid order), a count. The stream is api key, app, user
-- and model, as new.sql makes it. Parameters: $prefix (of the call ids), $sid (the source),
-- $fmt. Slot: session_id (a session's id from stream_key and session_start,
-- analyzer.formats.bills.sessions).
INSERT INTO calls BY NAME
SELECT
    $prefix || generation_id AS call_id,
    $sid AS source_id,
    $fmt AS format,
    generation_id AS native_id, line, ts, stream_key, seq,
    CASE WHEN session_start IS NULL THEN session_given
         ELSE {{session_id}} END AS session_id,
    model, provider, app, app AS project, api_key, user_id, variant,
    tokens_prompt_d::BIGINT AS input_tokens,
    tokens_cached_d::BIGINT AS cached_input_tokens,
    tokens_completion_d::BIGINT AS output_tokens,
    tokens_reasoning_d::BIGINT AS reasoning_tokens,
    true AS output_final,
    cost_total_d::DECIMAL(18, 10) AS cost_usd,
    CASE WHEN cost_total_d IS NOT NULL THEN 'billed' END AS cost_basis,
    cost_cache_d::DECIMAL(18, 10) AS cost_cache_usd,
    CASE WHEN cost_web_search_d IS NOT NULL OR cost_file_processing_d IS NOT NULL
         THEN (coalesce(cost_web_search_d, 0) + coalesce(cost_file_processing_d, 0))
              ::DECIMAL(18, 10) END AS cost_extra_usd,
    byok_usage_inference_d::DECIMAL(18, 10) AS byok_usd,
    fr AS finish_reason,
    coalesce(finish_raw, finish_norm) AS finish_reason_raw,
    lf_response_kind(fr, NULL, tokens_completion_d, tokens_reasoning_d,
                     NULL, NULL, NULL, NULL) AS response_kind,
    generation_time_ms_d AS duration_ms,
    time_to_first_token_ms_d AS ttft_ms,
    streamed,
    cancelled
FROM (SELECT t.*, s.line, s.seq, s.session_start, s.session_given,
             coalesce(t.api_key, '') || '|' || coalesce(t.app, '') || '|'
             || coalesce(t.user_id, '') || '|' || t.model AS stream_key,
             lf_finish_reason(coalesce(t.finish_norm, t.finish_raw), t.cancelled) AS fr
      FROM lf_or_typed t POSITIONAL JOIN lf_or_seq s
      WHERE s.seq IS NOT NULL);
