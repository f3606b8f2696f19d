-- Each side of the reconciliation: billing rows, logged calls, logged calls linked to a bill,
-- and the bills' time range (lo, hi). Slot {{is_bill}}: the predicate that says a call is a bill.
SELECT count(*) FILTER (WHERE {{is_bill}}),
       count(*) FILTER (WHERE NOT {{is_bill}}),
       count(*) FILTER (WHERE billing_call_id IS NOT NULL),
       min(ts) FILTER (WHERE {{is_bill}}),
       max(ts) FILTER (WHERE {{is_bill}})
FROM calls;
