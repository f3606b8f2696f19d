-- What stayed unmatched on each side: the logged calls inside the bills' period ($lo, $hi)
-- not linked to a bill (log_calls_unmatched); the billing rows, not superseded, of a logged
-- model within {{near_s}} seconds of one of its logged sessions (billing_rows_unmatched).
-- Slots: {{is_bill}} (the predicate on ``format`` that says a call is a bill), {{near_s}}.
WITH spans AS (
    SELECT session_id, lf_model_key(model) AS mk,
           min(ts) - INTERVAL {{near_s}} SECOND AS lo,
           max(ts) + INTERVAL {{near_s}} SECOND AS hi
    FROM calls WHERE NOT {{is_bill}} AND ts IS NOT NULL GROUP BY ALL),
-- a model's key once per model, not per billing row (10M rows: 3.5 s -> 0.3 s)
keyed AS (
    SELECT model, mk
    FROM (SELECT model, lf_model_key(model) AS mk
          FROM (SELECT DISTINCT model FROM calls WHERE {{is_bill}}))
    WHERE mk IN (SELECT mk FROM spans))
SELECT
    (SELECT count(*) FROM calls WHERE NOT {{is_bill}} AND billing_call_id IS NULL
                                  AND ts BETWEEN $lo AND $hi) AS log_calls_unmatched,
    (SELECT count(*) FROM calls b JOIN keyed k ON b.model = k.model
     WHERE {{is_bill}} AND b.superseded_by IS NULL
       AND b.ts BETWEEN (SELECT min(lo) FROM spans) AND (SELECT max(hi) FROM spans)
       AND EXISTS (SELECT 1 FROM spans s
                   WHERE s.mk = k.mk AND b.ts BETWEEN s.lo AND s.hi)) AS billing_rows_unmatched;
