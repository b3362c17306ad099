export { Outbox, type OutboxOptions, type RecordedEvent } from "./outbox.js";
