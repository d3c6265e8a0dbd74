-- lance_ops SQL: every statement on the demo table.
--
-- Run from the repository root after `make demo` (which writes demo-data/events.lance):
--   .venv/bin/python -c "import lance_ops; s = lance_ops.local_session(); \
--       lance_ops.sql(s, open('sql/examples.sql').read()).show()"
-- or paste into a %%lance_sql cell (%load_ext lance_ops). The demo table itself is only read:
-- the statements below work on a copy, sql-examples.lance, re-created at every run.

-- Create (or replace) a table from a query, with creation options and a table property,
-- and register the name `events` in the Spark session (spark.sql("... FROM events") works too).
CREATE OR REPLACE TABLE events USING lance LOCATION 'demo-data/sql-examples.lance'
  TBLPROPERTIES ('stableRowIds' = 'true', 'maxRowsPerFragment' = '20000', 'owner' = 'examples')
  AS SELECT id, user_id, score, name FROM lance.`demo-data/events.lance`;

-- Queries: each Lance table is read with only the columns the query uses.
SELECT user_id, count(*) AS n, round(avg(score), 2) AS avg_score
FROM events WHERE score > 50 GROUP BY user_id ORDER BY user_id;

WITH top AS (SELECT user_id, max(score) AS best FROM events GROUP BY user_id)
SELECT e.user_id, e.name FROM events e JOIN top t ON e.user_id = t.user_id AND e.score = t.best;

-- DML (results: num_affected_rows, ... as Delta returns them)
INSERT INTO events VALUES (900001, 1, 12.5, 'sql-insert-1'), (900002, 2, 87.5, 'sql-insert-2');
INSERT INTO events (id, name, score, user_id) SELECT id + 1000000, concat('copy-', name), score, user_id FROM events WHERE id < 3;
DELETE FROM events WHERE score < 2;
UPDATE events SET score = score + 1 WHERE user_id = 4;

CREATE OR REPLACE TEMP VIEW updates AS
  SELECT id, CAST(id % 7 AS BIGINT) AS user_id, 42.0 AS score, concat('merged-', id) AS name
  FROM range(99990, 100010);
MERGE INTO events AS t USING updates AS s ON t.id = s.id
  WHEN MATCHED AND s.id % 2 = 0 THEN UPDATE SET *
  WHEN MATCHED THEN DELETE
  WHEN NOT MATCHED THEN INSERT *
  WHEN NOT MATCHED BY SOURCE AND t.id = 900002 THEN UPDATE SET name = 'no longer in the source';

-- Schema evolution: null-filled typed columns, a backfill by SQL expression,
-- columns from a view joined on the stable row id, drop, rename.
ALTER TABLE events ADD COLUMNS (note STRING COMMENT 'free text, filled later');
ALTER TABLE events ADD COLUMNS (score_band = CAST(score / 10 AS INT));
CREATE OR REPLACE TEMP VIEW name_features AS SELECT _rowid, length(name) AS name_len FROM events;
ALTER TABLE events ADD COLUMNS name_len FROM name_features ON _rowid;
ALTER TABLE events RENAME COLUMN name_len TO name_length;
ALTER TABLE events DROP COLUMN note;
DESCRIBE events;

-- Table properties (table config: pylance's ds.config())
ALTER TABLE events SET TBLPROPERTIES ('team' = 'data-platform');
ALTER TABLE events UNSET TBLPROPERTIES ('owner');
SHOW TBLPROPERTIES events;

-- Time travel and tags
ALTER TABLE events CREATE TAG first_load AS OF VERSION 1;
SHOW TAGS events;
SELECT count(*) AS rows_at_v1 FROM events VERSION AS OF 1;
SELECT count(*) AS rows_at_tag FROM events@first_load;
SELECT count(*) AS rows_at_v2 FROM events@v2;
SELECT count(*) AS rows_now FROM events TIMESTAMP AS OF current_timestamp();

-- Change feed: rows inserted or updated after version 1
SELECT _change_type, count(*) AS n FROM table_changes('events', 1) GROUP BY _change_type ORDER BY 1;

-- Maintenance
DESCRIBE FRAGMENTS events;
OPTIMIZE events WITH (targetRowsPerFragment = 50000, materializeDeletions = true);
VACUUM events RETAIN 168 HOURS DRY RUN;
DESCRIBE DETAIL events;
DESCRIBE HISTORY events LIMIT 5;
RESTORE TABLE events TO VERSION AS OF 1;
ALTER TABLE events DROP TAG first_load;
SELECT count(*) AS rows_after_restore FROM events
