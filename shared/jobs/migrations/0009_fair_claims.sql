-- Fair claiming: while one workspace's jobs fill the queue, a lane claims round the workspaces that have
-- jobs waiting (the workspace-less ones count as one, ''), so another workspace's job does not wait behind
-- the whole backlog. This index lists the waiting workspaces of a type in key order and each one's jobs in
-- due order.
CREATE INDEX jobs_pending_workspace_idx
  ON job_reaper.jobs (type, (coalesce(workspace_key, '')), run_at, id) WHERE status = 'Pending';
