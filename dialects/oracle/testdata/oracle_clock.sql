-- oracle DatabaseNow
SELECT SYS_EXTRACT_UTC(SYSTIMESTAMP) FROM DUAL;
-- args: []

