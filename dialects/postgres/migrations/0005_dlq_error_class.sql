-- The DLQ's error class, stored (the console's fingerprints,
-- docs/console.md): the last error's first 1,000 characters with quoted
-- values, UUIDs, hexadecimal and decimal numbers masked, computed once
-- when a row is written instead of for every row at every look (21 s over
-- 1,000,000 rows when computed at read time). A generated column: no
-- writer can forget it or compute it differently.
--
-- On an existing table this rewrites it under an ACCESS EXCLUSIVE lock
-- (the DLQ's writers, the DLQ transfer and the poison queue, wait): about
-- 30 s per 1,000,000 rows here; docs/console.md has the figure.
ALTER TABLE {{.DLQ}}
  ADD COLUMN error_class text GENERATED ALWAYS AS (
    regexp_replace(regexp_replace(regexp_replace(regexp_replace(
      left(coalesce(last_error, ''), 1000),
      '"[^"]*"|''[^'']*''', '?', 'g'),
      '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '<id>', 'g'),
      '0[xX][0-9a-fA-F]+', '<hex>', 'g'),
      '[0-9]+', 'N', 'g')) STORED;

-- A fingerprint's act pages through a group's ids by this index, one
-- range a page, and the view reads each group's newest error in it. (The
-- view's grouping of the whole table reads the table itself: a parallel
-- scan was faster than this index, 0.3 s against 1 s at 1,000,000 rows.)
-- About 170 MB at 1,000,000 rows with these error texts: each entry holds
-- its class.
CREATE INDEX {{.Prefix}}outbox_dlq_events_class_idx
    ON {{.DLQ}} (source, event_type, error_class, status, id);
