-- Dead letters are announced: each Failed job is published once as the event
-- `job.dead-lettered`, which becomes notifications for the operators who can act on it.
ALTER TABLE job_reaper.jobs ADD COLUMN announced_at timestamptz;
-- Failed jobs that existed before this migration are not announced after the fact.
UPDATE job_reaper.jobs SET announced_at = now() WHERE status = 'Failed';
CREATE INDEX jobs_unannounced_dead ON job_reaper.jobs (id) WHERE status = 'Failed' AND announced_at IS NULL;
