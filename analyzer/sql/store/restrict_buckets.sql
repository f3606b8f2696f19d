-- The bill buckets of a time window, shadowing the stored table. Slots: {{db}} the store's
-- database name (quoted), {{condition}} a predicate over bucket_start. No parameters.
CREATE OR REPLACE TEMP TABLE bill_buckets AS
    SELECT * FROM "{{db}}".main.bill_buckets WHERE {{condition}};
