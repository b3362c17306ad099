-- The trace context of the change that recorded the event: `traceparent[;tracestate]`, or NULL
-- when tracing is off. The relay publishes the event inside that trace.
ALTER TABLE rbac.outbox ADD COLUMN trace_context text;
