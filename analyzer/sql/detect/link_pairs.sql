-- One round's links (lf_links: log_id, bill_id): the pairs of an unlinked log (lf_link_logs)
-- and an unsuperseded bill that are each other's nearest candidate, by id (the log's response
-- id is the bill's native id) or by time within the window, model key and token counts; ties
-- broken by the other side's id. Returns how many. Parameters: $lo, $hi (the logs' time range
-- widened by the window). Slots: {{is_bill}} (the predicate on ``format`` that says a call is
-- a bill; where bills are joined, only the bills' side has that column), {{window_s}},
-- {{window_us}} (the window in seconds and microseconds).
CREATE OR REPLACE TEMP TABLE lf_links AS
WITH by_id AS (
    SELECT l.call_id AS log_id, b.call_id AS bill_id, -1.0 AS dt
    FROM lf_link_logs l
    JOIN (SELECT call_id, native_id FROM calls
          WHERE {{is_bill}} AND superseded_by IS NULL
            AND native_id IN (SELECT response_id FROM lf_link_logs)) b
      ON b.native_id = l.response_id
),
-- A model's key once per model (not per billing row), for the models logs have.
keys AS (
    SELECT model, mk
    FROM (SELECT model, lf_model_key(model) AS mk
          FROM (SELECT DISTINCT model FROM calls
                WHERE {{is_bill}} AND ts BETWEEN $lo AND $hi))
    WHERE mk IN (SELECT mk FROM lf_link_logs)
),
-- A bill within the window of a log lies in the log's bucket of the window's width or
-- a bucket beside it: bills are joined on (model key, bucket), the window then checked.
near AS (
    SELECT b.call_id, b.ts, k.mk, b.input_tokens, b.output_tokens,
           epoch_us(b.ts) // {{window_us}} AS bucket
    FROM calls b JOIN keys k ON b.model = k.model
    WHERE {{is_bill}} AND b.superseded_by IS NULL
      AND b.ts BETWEEN $lo AND $hi
),
by_time AS (
    SELECT l.call_id AS log_id, b.call_id AS bill_id,
           abs(epoch(b.ts) - epoch(l.ts)) AS dt
    FROM (SELECT *, unnest([bk - 1, bk, bk + 1]) AS bucket FROM lf_link_logs) l
    JOIN near b ON b.mk = l.mk AND b.bucket = l.bucket
    WHERE b.ts BETWEEN l.ts - INTERVAL {{window_s}} SECOND
                   AND l.ts + INTERVAL {{window_s}} SECOND
      AND (l.input_tokens IS NULL OR l.input_tokens = b.input_tokens)
      AND (l.output_tokens IS NULL OR NOT coalesce(l.output_final, false)
           OR l.output_tokens = b.output_tokens)
),
ranked AS (
    SELECT *,
           row_number() OVER (PARTITION BY log_id ORDER BY dt, bill_id) AS r_log,
           row_number() OVER (PARTITION BY bill_id ORDER BY dt, log_id) AS r_bill
    FROM (SELECT * FROM by_id UNION ALL SELECT * FROM by_time)
)
SELECT log_id, bill_id FROM ranked WHERE r_log = 1 AND r_bill = 1;

SELECT count(*) FROM lf_links;
