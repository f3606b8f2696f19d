-- Apply one round's links (lf_links: log_id, bill_id): the logged call takes the bill's
-- dollars, model, app, key and user (and, where the log had none, its token counts); the bill
-- is marked superseded by the logged call, so every call is counted once. No parameters.
UPDATE calls SET
    billing_call_id = k.bill_id,
    model = b.model,
    provider = coalesce(b.provider, calls.provider),
    app = coalesce(b.app, calls.app),
    api_key = b.api_key,
    user_id = coalesce(b.user_id, calls.user_id),
    cost_usd = b.cost_usd,
    cost_basis = b.cost_basis,
    input_tokens = coalesce(calls.input_tokens, b.input_tokens),
    cached_input_tokens = coalesce(calls.cached_input_tokens, b.cached_input_tokens),
    output_tokens = CASE WHEN coalesce(calls.output_final, false)
                         THEN calls.output_tokens
                         ELSE coalesce(b.output_tokens, calls.output_tokens) END,
    reasoning_tokens = coalesce(calls.reasoning_tokens, b.reasoning_tokens),
    output_final = coalesce(calls.output_final, false) OR b.output_tokens IS NOT NULL,
    output_estimate_tokens = CASE WHEN b.output_tokens IS NULL
                                  THEN calls.output_estimate_tokens END,
    output_estimate_floor = CASE WHEN b.output_tokens IS NULL
                                 THEN calls.output_estimate_floor END,
    cost_logged_usd = NULL,
    response_kind = coalesce(calls.response_kind, lf_response_kind(
        calls.finish_reason, calls.http_status, b.output_tokens, b.reasoning_tokens,
        calls.content_chars, calls.visible_chars, calls.reasoning_chars,
        calls.tool_call_count))
FROM lf_links k JOIN calls b ON b.call_id = k.bill_id
WHERE calls.call_id = k.log_id;

UPDATE calls SET superseded_by = k.log_id
FROM lf_links k WHERE calls.call_id = k.bill_id;
