-- Whether there is anything to link: a logged call not yet linked (with a time) and a bill not
-- yet superseded. Slot {{is_bill}}: the predicate on a call's format that says it is a bill.
SELECT EXISTS (SELECT 1 FROM calls WHERE NOT {{is_bill}} AND billing_call_id IS NULL
                                   AND ts IS NOT NULL)
       AND EXISTS (SELECT 1 FROM calls WHERE {{is_bill}} AND superseded_by IS NULL);
