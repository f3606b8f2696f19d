-- The new requests (lf_ll_new) into calls, numbered in their streams and sessions (a
-- session the log gives, else one inferred from silences), a count. Parameters: $prefix (of
-- the call ids), $sid (the source), $fmt, $gap (seconds of silence that start a session).
-- Slot: numbered (lf_ll_new with seq and session_id, analyzer.formats.bills.sessions).
INSERT INTO calls BY NAME
SELECT
    $prefix || native_id AS call_id, $sid AS source_id, $fmt AS format,
    native_id, line, ts, stream_key, seq,
    coalesce(given_session, session_id) AS session_id,
    model, provider, app, app AS project, api_key, user_id,
    input_tokens, cached_input_tokens, cache_write_tokens, output_tokens,
    output_tokens IS NOT NULL AS output_final,
    cost_usd,
    CASE WHEN cost_usd IS NOT NULL THEN 'billed' END AS cost_basis,
    fr AS finish_reason, finish_raw AS finish_reason_raw,
    CASE WHEN fr = 'error' THEN 'error'
         ELSE lf_response_kind(fr, NULL, output_tokens, NULL, NULL, NULL, NULL, NULL)
    END AS response_kind,
    http_status, duration_ms, ttft_ms, streamed
FROM (SELECT *, lf_finish_reason(finish_raw, NULL) AS fr
      FROM ({{numbered}}));
