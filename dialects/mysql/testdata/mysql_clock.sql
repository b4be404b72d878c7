-- mysql DatabaseNow
SELECT UTC_TIMESTAMP(6);
-- args: []

