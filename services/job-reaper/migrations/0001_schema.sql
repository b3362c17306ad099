-- The job-reaper service owns the schema job_reaper. Its tables arrive with the issues that build the service.
CREATE SCHEMA IF NOT EXISTS job_reaper;
