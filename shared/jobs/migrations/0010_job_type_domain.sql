-- A job's type is checked when it is written, not on every change of the row. As a table CHECK, the
-- pattern ran on each claim and completion too (PostgreSQL evaluates every CHECK of the table for each
-- new row version): about a fifth of a write-back's cost. A domain's check runs only where a value is
-- assigned to the column, and nothing changes a job's type after its insert. The same pattern, the same
-- rows refused.
CREATE DOMAIN job_reaper.job_type AS text CHECK (VALUE ~ '^[a-z0-9][a-z0-9._-]{0,99}$');
ALTER TABLE job_reaper.jobs DROP CONSTRAINT jobs_type_check;
ALTER TABLE job_reaper.jobs ALTER COLUMN type TYPE job_reaper.job_type;
