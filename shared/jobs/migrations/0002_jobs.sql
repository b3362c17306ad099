-- The job engine. Jobs are rows; a claim grants a lease with a fencing token taken from a
-- sequence, so every claim's token is new and larger than any before it. Write-backs (complete, fail,
-- renew) name the token and are refused once another claim has replaced it.
CREATE SEQUENCE job_reaper.fencing_tokens AS bigint;

CREATE TABLE job_reaper.jobs (
  id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  type             text        NOT NULL CHECK (type ~ '^[a-z0-9][a-z0-9._-]{0,99}$'),
  status           text        NOT NULL DEFAULT 'Pending'
                               CHECK (status IN ('Pending', 'Running', 'Succeeded', 'Failed')),
  workspace_key    text,
  payload          jsonb       NOT NULL DEFAULT '{}',
  idempotency_key  text        CHECK (length(idempotency_key) BETWEEN 1 AND 200),
  attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  max_attempts     integer     NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
  run_at           timestamptz NOT NULL DEFAULT now(),
  created_at       timestamptz NOT NULL DEFAULT now(),
  started_at       timestamptz,
  completed_at     timestamptz,
  last_error       text,
  lease_token      bigint,
  lease_expires_at timestamptz,
  locked_by        text
) WITH (fillfactor = 80);

-- Claims: due pending jobs of a type, oldest first.
CREATE INDEX jobs_pending_idx ON job_reaper.jobs (type, run_at, id) WHERE status = 'Pending';
-- The reaper: running jobs by lease expiry.
CREATE INDEX jobs_running_lease_idx ON job_reaper.jobs (lease_expires_at) WHERE status = 'Running';
-- Idempotent enqueue: one job per (type, key).
CREATE UNIQUE INDEX jobs_idempotency_idx ON job_reaper.jobs (type, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
-- The jobs list reads newest first through the primary key. There is deliberately no index on
-- workspace_key: every status change would have to maintain it (status changes cannot be HOT updates,
-- status being in the partial indexes' predicates), which costs about a fifth of the engine's
-- throughput. See docs/operator-guide.md ("Jobs") for when to add one.

-- Workers LISTEN on svc_jobs; each insert statement notifies once per job type it made due.
CREATE FUNCTION job_reaper.notify_jobs_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('svc_jobs', t.type)
  FROM (SELECT DISTINCT type FROM inserted WHERE run_at <= now()) AS t;
  RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_inserted AFTER INSERT ON job_reaper.jobs
  REFERENCING NEW TABLE AS inserted
  FOR EACH STATEMENT EXECUTE FUNCTION job_reaper.notify_jobs_inserted();
