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

export function registerFormats(): void {
  if (!FormatRegistry.Has("uri")) FormatRegistry.Set("uri", (value) => URI.test(value));
  if (!FormatRegistry.Has("uuid")) FormatRegistry.Set("uuid", (value) => UUID.test(value));
  if (!FormatRegistry.Has("email")) FormatRegistry.Set("email", (value) => EMAIL.test(value));
}
