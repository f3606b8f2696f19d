-- The incidents of a time window, shadowing the stored table. Slots: {{db}} the store's
-- database name (quoted), {{condition}} a predicate over start_ts. No parameters.
CREATE OR REPLACE TEMP VIEW incidents AS
    SELECT * FROM "{{db}}".main.incidents WHERE {{condition}};
