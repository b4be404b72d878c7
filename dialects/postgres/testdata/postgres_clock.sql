-- postgres DatabaseNow
SELECT clock_timestamp();
-- args: []

