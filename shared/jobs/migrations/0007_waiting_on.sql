-- A deferred job may say what it waits on (a receiver's circuit): whoever sees that thing recover makes
-- every job waiting on it due at once, through the job library, without reading any job's error text.
ALTER TABLE job_reaper.jobs ADD COLUMN waiting_on text;
CREATE INDEX jobs_waiting_on_idx ON job_reaper.jobs (waiting_on) WHERE status = 'Pending' AND waiting_on IS NOT NULL;
