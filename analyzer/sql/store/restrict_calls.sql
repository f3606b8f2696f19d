-- The calls and messages of a time window: temporary tables of the stored tables' names that
-- shadow them, and live_calls over them. Slots: {{db}} the store's database name (quoted),
-- {{condition}} a predicate over ts the code built (Window). No parameters.
CREATE OR REPLACE TEMP TABLE calls AS
    SELECT * FROM "{{db}}".main.calls WHERE {{condition}};
CREATE OR REPLACE TEMP TABLE messages AS
    SELECT * FROM "{{db}}".main.messages WHERE {{condition}};
CREATE OR REPLACE TEMP VIEW live_calls AS
    SELECT * FROM temp.main.calls WHERE superseded_by IS NULL;
