-- Set one DuckDB setting on the connection. Slots: {{setting}} its name, {{value}} its value as
-- the text of a SQL string literal (quoted by the code; put in as given, never read for slots).
-- No parameters.
SET {{setting}} = '{{value}}';
