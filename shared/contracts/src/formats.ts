/**
 * The string formats the contracts use, for TypeBox's checker, as the gateway's validator (Ajv with
 * ajv-formats) defines them: a request the gateway let through is never refused by the service for a format.
 */
import { FormatRegistry } from "@sinclair/typebox";

const UUID = /^(?:urn:uuid:)?[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}$/i;
const EMAIL =
  /^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;

/** Has a scheme: the rest of an absolute URI is judged by the gateway's validator and the handler. */
const URI = /^[a-z][a-z0-9+.-]*:\S*$/i;

/** RFC 3339 date-time, as ajv-formats' `date-time` (a time zone is required). */
const DATE_TIME =
  /^\d{4}-[01]\d-[0-3]\dt(?:[0-2]\d:[0-5]\d:[0-5]\d|23:59:60)(?:\.\d+)?(?:z|[+-][0-2]\d:?[0-5]\d)$/i;

export function registerFormats(): void {
  if (!FormatRegistry.Has("date-time")) {
    FormatRegistry.Set("date-time", (value) => DATE_TIME.test(value) && !Number.isNaN(Date.parse(value)));
  }
  if (!FormatRegistry.Has("uri")) FormatRegistry.Set("uri", (value) => URI.test(value));
  if (!FormatRegistry.Has("uuid")) FormatRegistry.Set("uuid", (value) => UUID.test(value));
  if (!FormatRegistry.Has("email")) FormatRegistry.Set("email", (value) => EMAIL.test(value));
}
