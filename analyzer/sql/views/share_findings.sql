-- What this machine found in the calls about to be shared (slot: table; incidents or
-- incident_calls): the incidents the store holds with a wasted or first call among the calls of
-- the files being shared (lf_share_sources), and their calls, written as one Parquet file (slot:
-- target, a quoted SQL string), in incident order.
COPY (SELECT t.* FROM main.{{table}} t
      WHERE t.incident_id IN (
          SELECT ic.incident_id FROM main.incident_calls ic
          WHERE ic.call_id IN (SELECT call_id FROM main.calls
                               WHERE source_id IN (SELECT source_id FROM lf_share_sources))
          UNION
          SELECT i.incident_id FROM main.incidents i
          WHERE i.first_call_id IN (SELECT call_id FROM main.calls
                                    WHERE source_id IN (SELECT source_id FROM lf_share_sources)))
      ORDER BY ALL)
TO {{target}} (FORMAT parquet);
