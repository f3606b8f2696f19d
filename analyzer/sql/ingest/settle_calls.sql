-- A set of files' calls to store (lf_call_kept, made by settle_in_file.sql from lf_call_batch:
-- one row per native id and file, each with its source_id and place pos; lf_price: the prices
-- they need, price_keys.sql) settled against the calls of format fmt the store holds, and
-- inserted. A stored call is a duplicate - unless a file holds more of it
-- (more records shaped it: a log read again once it grew): then the fuller version replaces
-- it, and only the records it adds count as loaded. Parameters: fmt, prefix (of call ids).
-- Slots: cost and web_search (the pricing rules' expressions over b and p).
-- The last statement, for each source: its duplicate records (those settle_in_file.sql left
-- out, and those the store holds) and the calls it has (source_id, dup, calls).
CREATE OR REPLACE TEMP TABLE lf_known AS
SELECT b.source_id, b.n_records, c.call_id,
       CASE WHEN c.record_count IS NOT NULL AND b.parts > c.record_count
            THEN least(b.n_records, c.record_count) ELSE b.n_records END AS dup,
       c.record_count IS NOT NULL AND b.parts > c.record_count AS grown
FROM lf_call_kept b JOIN calls c ON c.format = $fmt AND c.native_id = b.native_id;

UPDATE calls SET superseded_by = NULL
WHERE superseded_by IN (SELECT call_id FROM lf_known WHERE grown);

DELETE FROM calls WHERE call_id IN (SELECT call_id FROM lf_known WHERE grown);

-- Logs carry tokens, and some a cost of their own ('reported'); every call with tokens is
-- also estimated from list prices (cost_estimate_usd), and the estimate is its cost when the
-- log states none.
INSERT INTO calls BY NAME
SELECT b.* EXCLUDE (n_records, parts, replay, pos, cost_usd, cost_basis, fr, estimate, logged),
       b.parts AS record_count,
       $prefix || ':' || b.native_id AS call_id,
       $fmt AS format,
       coalesce(b.cost_usd, b.estimate)::DECIMAL(18, 10) AS cost_usd,
       CASE WHEN b.cost_usd IS NOT NULL THEN b.cost_basis
            WHEN b.estimate IS NOT NULL AND b.output_estimate_tokens IS NOT NULL
            THEN 'estimated_output'
            WHEN b.estimate IS NOT NULL THEN 'estimated' END AS cost_basis,
       b.estimate::DECIMAL(18, 10) AS cost_estimate_usd,
       CASE WHEN b.cost_usd IS NULL AND b.output_estimate_tokens IS NOT NULL
            THEN b.logged END::DECIMAL(18, 10) AS cost_logged_usd,
       CASE WHEN b.cost_usd IS NULL AND b.estimate IS NOT NULL
                 AND b.web_search_requests > 0
            THEN {{web_search}} END::DECIMAL(18, 10) AS cost_extra_usd,
       b.fr AS finish_reason,
       lf_response_kind(b.fr, b.http_status, b.output_tokens, b.reasoning_tokens,
                        b.content_chars, b.visible_chars, b.reasoning_chars,
                        b.tool_call_count) AS response_kind
FROM (SELECT b.*, lf_finish_reason(b.finish_reason_raw, b.cancelled) AS fr,
             CASE WHEN p.model IS NOT NULL
                  THEN {{cost}} + {{web_search}} END AS logged,
             -- a placeholder output count is priced at its estimate
             logged + CASE WHEN b.output_estimate_tokens IS NOT NULL
                           THEN (b.output_estimate_tokens
                                 - coalesce(b.output_tokens, 0)) * p.p_out
                           ELSE 0 END AS estimate
      FROM lf_call_kept b
      LEFT JOIN lf_price p
        ON p.model = b.model
       AND (b.input_tokens IS NOT NULL OR b.output_tokens IS NOT NULL)
       AND p.provider IS NOT DISTINCT FROM b.provider
       AND p.day IS NOT DISTINCT FROM b.ts::DATE
       AND p.fast = (b.variant IS NOT DISTINCT FROM 'fast')
       AND coalesce(b.input_tokens, 0) > p.above
       AND (p.upto IS NULL OR coalesce(b.input_tokens, 0) <= p.upto)) b
WHERE NOT EXISTS (SELECT 1 FROM calls c WHERE c.format = $fmt AND c.native_id = b.native_id)
ORDER BY b.source_id, b.pos;

SELECT s.source_id,
       (s.records - coalesce(k.records, 0) + coalesce(d.dup, 0))::BIGINT AS dup,
       coalesce(k.calls, 0)::BIGINT AS calls
FROM (SELECT source_id, coalesce(sum(n_records), 0) AS records
      FROM lf_call_batch GROUP BY source_id) s
LEFT JOIN (SELECT source_id, coalesce(sum(n_records), 0) AS records, count(*) AS calls
           FROM lf_call_kept GROUP BY source_id) k USING (source_id)
LEFT JOIN (SELECT source_id, sum(dup) AS dup FROM lf_known GROUP BY source_id) d
       USING (source_id)
ORDER BY s.source_id;
