"""Detection: the SQL detectors, how they are run (DuckDB or Spark), and the
linking, reconciliation and blindness they rest on."""
