-- Every filter of GET /api/jobs has an index path, newest first, at any table size
-- (`make bench-jobs-list`: p95 < 20 ms at 1,000,000 jobs). A type or a workspace whose jobs are all old
-- made the list walk back through every newer job; so did failures that are all old. Succeeded, nearly
-- every row, is served by the primary key; Pending and Running jobs are recent by nature (the newest ids).
-- Their cost on job throughput is in the operator guide.
CREATE INDEX jobs_type_id_idx ON job_reaper.jobs (type, id);
CREATE INDEX jobs_workspace_id_idx ON job_reaper.jobs (workspace_key, id) WHERE workspace_key IS NOT NULL;
CREATE INDEX jobs_failed_id_idx ON job_reaper.jobs (id) WHERE status = 'Failed';
