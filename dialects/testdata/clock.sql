-- postgres DatabaseNow
SELECT clock_timestamp();
-- args: []

-- mysql DatabaseNow
SELECT UTC_TIMESTAMP(6);
-- args: []

-- oracle DatabaseNow
SELECT SYS_EXTRACT_UTC(SYSTIMESTAMP) FROM DUAL;
-- args: []

