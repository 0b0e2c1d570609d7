-- A drover store at schema version 1, as drover 0.1 wrote it: the exact v1 schema (migration 1 in
-- src/store/migrations.cc) plus a few rows. store_test builds a database file from this and opens
-- it with Store::Open to check the upgrade to the latest version keeps every row readable.
-- Do not edit the schema part: it must stay what version 1 was (migrations_test checks).
BEGIN;
CREATE TABLE experiments (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  name          TEXT    NOT NULL,
  spec_yaml     TEXT    NOT NULL DEFAULT '',
  spec          TEXT    NOT NULL DEFAULT '{}',
  snapshot_hash TEXT    NOT NULL DEFAULT '',
  status        TEXT    NOT NULL DEFAULT 'active',
  created_ms    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX experiments_by_name ON experiments(name, id);
CREATE TABLE runs (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id  INTEGER NOT NULL REFERENCES experiments(id),
  grid_index     INTEGER NOT NULL DEFAULT 0,
  params         TEXT    NOT NULL DEFAULT '{}',
  current_params TEXT    NOT NULL DEFAULT '{}',
  fingerprint    TEXT    NOT NULL DEFAULT '',
  state          TEXT    NOT NULL DEFAULT 'queued',
  priority       INTEGER NOT NULL DEFAULT 0,
  gpus           INTEGER NOT NULL DEFAULT 0,
  gpu_memory     INTEGER NOT NULL DEFAULT 0,
  cpus           INTEGER NOT NULL DEFAULT 1,
  attempts       INTEGER NOT NULL DEFAULT 0,
  retries_used   INTEGER NOT NULL DEFAULT 0,
  not_before_ms  INTEGER NOT NULL DEFAULT 0,
  created_ms     INTEGER NOT NULL DEFAULT 0,
  started_ms     INTEGER NOT NULL DEFAULT 0,
  ended_ms       INTEGER NOT NULL DEFAULT 0,
  reason         TEXT    NOT NULL DEFAULT '',
  final_metrics  TEXT    NOT NULL DEFAULT '{}'
);
CREATE TABLE attempts (
  id                   INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id               INTEGER NOT NULL REFERENCES runs(id),
  number               INTEGER NOT NULL DEFAULT 0,
  ended                INTEGER NOT NULL DEFAULT 0,
  reason               TEXT    NOT NULL DEFAULT '',
  exit_code            INTEGER NOT NULL DEFAULT -1,
  signal               INTEGER NOT NULL DEFAULT 0,
  pid                  INTEGER NOT NULL DEFAULT 0,
  gpus                 TEXT    NOT NULL DEFAULT '[]',
  cuda_visible_devices TEXT    NOT NULL DEFAULT '',
  params               TEXT    NOT NULL DEFAULT '{}',
  argv                 TEXT    NOT NULL DEFAULT '[]',
  started_ms           INTEGER NOT NULL DEFAULT 0,
  ended_ms             INTEGER NOT NULL DEFAULT 0,
  stdout_path          TEXT    NOT NULL DEFAULT '',
  stderr_path          TEXT    NOT NULL DEFAULT '',
  stdout_offset        INTEGER NOT NULL DEFAULT 0,
  hostname             TEXT    NOT NULL DEFAULT '',
  drover_version       TEXT    NOT NULL DEFAULT '',
  workdir              TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX attempts_by_run ON attempts(run_id, number);
CREATE TABLE metrics (
  run_id     INTEGER NOT NULL REFERENCES runs(id),
  attempt_id INTEGER NOT NULL DEFAULT 0,
  step       INTEGER NOT NULL DEFAULT 0,
  name       TEXT    NOT NULL,
  value      REAL,
  t_ms       INTEGER NOT NULL DEFAULT 0
);

INSERT INTO experiments (id, name, spec_yaml, spec, snapshot_hash, status, created_ms) VALUES
  (1, 'mnist-grid', 'name: mnist-grid
command: [python3, train.py, --lr, "{lr}"]
params:
  lr: [0.1, 0.01]
', '{"command":["python3","train.py","--lr","{lr}"],"name":"mnist-grid","params":{"lr":[0.1,0.01]}}',
   'sha256:aaaa', 'done', 1700000000000),
  (2, 'mnist-grid', 'name: mnist-grid
', '{"name":"mnist-grid"}', 'sha256:bbbb', 'active', 1700000100000),
  (3, '比较 mlp', '', '{}', '', 'active', 1700000200000);

INSERT INTO runs (id, experiment_id, grid_index, params, current_params, fingerprint, state,
                  priority, gpus, gpu_memory, cpus, attempts, retries_used, not_before_ms,
                  created_ms, started_ms, ended_ms, reason, final_metrics) VALUES
  (1, 1, 0, '{"lr":0.1}', '{"lr":0.1}', 'fp-1', 'succeeded', 5, 1, 8589934592, 2, 1, 0, 0,
   1700000000001, 1700000001000, 1700000061000, 'succeeded', '{"loss":0.25,"acc":0.93}'),
  (2, 1, 1, '{"lr":0.01,"batch_size":64}', '{"lr":0.01,"batch_size":32}', 'fp-2', 'failed', 5,
   1, 8589934592, 2, 2, 1, 1700000070000, 1700000000002, 1700000001000, 1700000090000,
   'cuda_oom', '{}'),
  (3, 2, 0, '{}', '{}', 'fp-3', 'queued', 0, 0, 0, 1, 0, 0, 0, 1700000100001, 0, 0, '', '{}');

INSERT INTO attempts (id, run_id, number, ended, reason, exit_code, signal, pid, gpus,
                      cuda_visible_devices, params, argv, started_ms, ended_ms, stdout_path,
                      stderr_path, stdout_offset, hostname, drover_version, workdir) VALUES
  (1, 1, 1, 1, 'succeeded', 0, 0, 4242, '[0]', '0', '{"lr":0.1}',
   '["python3","train.py","--lr","0.1"]', 1700000001000, 1700000061000,
   '/store/runs/1/1/stdout', '/store/runs/1/1/stderr', 1234, 'gpu-box', '0.1.0', '/store/work/1'),
  (2, 2, 1, 1, 'cuda_oom', 1, 0, 4300, '[1,2]', '1,2', '{"lr":0.01,"batch_size":64}',
   '["python3","train.py","--lr","0.01"]', 1700000001000, 1700000030000,
   '/store/runs/2/1/stdout', '/store/runs/2/1/stderr', 99, 'gpu-box', '0.1.0', '/store/work/2'),
  (3, 2, 2, 1, 'signal', -1, 9, 4400, '[1]', '1', '{"lr":0.01,"batch_size":32}',
   '["python3","train.py","--lr","0.01"]', 1700000070000, 1700000090000,
   '/store/runs/2/2/stdout', '/store/runs/2/2/stderr', 0, 'gpu-box', '0.1.0', '/store/work/2');

INSERT INTO metrics (run_id, attempt_id, step, name, value, t_ms) VALUES
  (1, 1, 1, 'loss', 0.9, 1700000010000),
  (1, 1, 1, 'acc', 0.5, 1700000010000),
  (1, 1, 2, 'loss', 0.25, 1700000020000),
  (1, 1, 2, 'acc', 0.93, 1700000020000),
  (2, 2, 1, 'loss', NULL, 1700000020000),
  (2, 3, 1, 'loss', 1.5, 1700000080000);

PRAGMA user_version=1;
COMMIT;
