-- Job workers that are alive: each writes its heartbeat every two seconds. A Running
-- job whose worker has not been heard from for ten seconds is released by the reaper like an expired lease,
-- so the claims of a process that died wait seconds, not the five-minute lease.
CREATE TABLE job_reaper.workers (
  worker_id    text        PRIMARY KEY,
  heartbeat_at timestamptz NOT NULL DEFAULT now()
);
