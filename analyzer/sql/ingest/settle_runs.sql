-- A file's runs (lf_run_batch) settled against the store and inserted. A run of a session
-- stored already is a duplicate - unless this file says more of it (a verdict or a stated
-- cost the stored run lacks, more calls): then this run replaces the stored one.
-- Parameters: sid (the file's source). The last statement: the duplicate records.
DELETE FROM runs WHERE session_id IN (
    SELECT b.session_id FROM lf_run_batch b JOIN runs r USING (session_id)
    WHERE (b.exit_status IS NOT NULL AND r.exit_status IS NULL)
       OR (b.reported_cost_usd IS NOT NULL AND r.reported_cost_usd
           IS DISTINCT FROM b.reported_cost_usd::DECIMAL(18, 10))
       OR coalesce(b.reported_calls, 0) > coalesce(r.reported_calls, 0));

CREATE OR REPLACE TEMP TABLE lf_run_dup AS
SELECT coalesce(sum(n_records), 0)::BIGINT AS dup FROM lf_run_batch b
WHERE EXISTS (SELECT 1 FROM runs r WHERE r.session_id = b.session_id);

INSERT INTO runs BY NAME
SELECT $sid AS source_id,
       * EXCLUDE (n_records, reported_cost_usd, cost_limit_usd, cost_estimate_usd),
       reported_cost_usd::DECIMAL(18, 10) AS reported_cost_usd,
       cost_estimate_usd::DECIMAL(18, 10) AS cost_estimate_usd,
       cost_limit_usd::DECIMAL(18, 10) AS cost_limit_usd
FROM lf_run_batch b
WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.session_id = b.session_id);

SELECT dup FROM lf_run_dup;
