-- The trace context of what enqueued the job: `traceparent[;tracestate]`, or NULL when tracing
-- is off. The job's run is a span of that trace, so a delivery joins the request that caused it.
ALTER TABLE job_reaper.jobs ADD COLUMN trace_context text;
