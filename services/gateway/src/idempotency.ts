/**
 * `Idempotency-Key` on the operator API's write routes (POST, PUT, DELETE), with the semantics of the
 * IETF draft: the first request with a key runs and its answer is kept; a retry with the same key and the
 * same request gets that answer again (`Idempotency-Replayed: true`) without running again; the same key
 * with another request is a 422; a retry while the first is still running is a 409. Keys are per caller
 * (the session's subject), kept 24 hours in the NATS KV bucket `<prefix>_idempotency`. An answer of 5xx
 * (the service away or slow) is not kept here: the key is released so that the retry goes to the owning
 * service, which keeps every keyed write's outcome in the transaction of its change (the key and digest
 * travel in `Svc-Idempotency-Key` and `Svc-Idempotency-Fingerprint`; @svc/runtime's keyed-writes.ts): a
 * commit made just before a 504, or whose answer was lost with a killed process, is replayed, not run
 * again; so is every answer after NATS lost this bucket.
 */
import { createHash } from "node:crypto";

import type { KV } from "@nats-io/kv";
import { type RouteReply, withheldReply } from "@svc/bus";
import { ConflictError, ErrorCode, SecretShownOnceError, SvcError, ValidationError } from "@svc/errors";

export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

interface InFlight {
  readonly state: "in-flight";
  readonly fingerprint: string;
  readonly at: number;
}
interface Done {
  readonly state: "done";
  readonly fingerprint: string;
  readonly status: number;
  readonly headers?: Record<string, string>;
  readonly body?: unknown;
  /** The reply showed a secret once: its body is kept nowhere, and a replay is a 409 (`secret-shown-once`). */
  readonly withheld?: true;
  /** A kept error answer: its code and problem members. */
  readonly error?: { code: string; detail: string; extensions: Record<string, unknown> };
}
type Entry = InFlight | Done;

export type Claim =
  | {
      readonly kind: "run";
      /** What the owning service keeps the outcome under: the key scoped to its caller, and the request's digest. */
      readonly forward: { readonly key: string; readonly fingerprint: string };
      finish(result: RouteReply): Promise<void>;
      fail(error: unknown): Promise<void>;
    }
  | { readonly kind: "replay"; readonly reply: RouteReply; readonly error?: SvcError };

export class Idempotency {
  constructor(
    private readonly kv: () => KV,
    /** An in-flight claim older than this is taken to be abandoned (its gateway died). */
    private readonly abandonAfterMs: number,
  ) {}

  static validate(key: string | undefined): void {
    if (key !== undefined && !KEY_PATTERN.test(key)) {
      throw new ValidationError([
        { field: "/headers/idempotency-key", message: "must be 1 to 255 visible ASCII characters" },
      ]);
    }
  }

  /** `withholdReply`: the route's reply shows a secret once (RouteSpec `secretReply`). */
  async claim(
    subject: string,
    key: string,
    request: unknown,
    options: { readonly withholdReply?: boolean } = {},
  ): Promise<Claim> {
    const kvKey = createHash("sha256").update(`${subject}\n${key}`).digest("base64url").replaceAll("-", "_");
    // The caller's key is in it, so that a request's digest, kept in the bucket and the services' tables
    // for a day, cannot be tried offline against guesses of the password or secret it carries.
    const fingerprint = createHash("sha256")
      .update(`${subject}\n${key}\n`)
      .update(JSON.stringify(request))
      .digest("base64url");
    const kv = this.kv();
    for (let attempt = 0; attempt < 5; attempt++) {
      const existing = await kv.get(kvKey);
      if (existing === null || existing.operation !== "PUT") {
        const claim: InFlight = { state: "in-flight", fingerprint, at: Date.now() };
        try {
          if (existing === null) await kv.create(kvKey, JSON.stringify(claim));
          else await kv.update(kvKey, JSON.stringify(claim), existing.revision);
        } catch {
          continue; // another request with this key claimed it meanwhile
        }
        return this.running(kv, kvKey, fingerprint, options.withholdReply === true);
      }
      const entry = JSON.parse(existing.string()) as Entry;
      if (entry.fingerprint !== fingerprint) {
        throw new SvcError(
          ErrorCode.IdempotencyKeyReused,
          "This Idempotency-Key was used with a different request.",
        );
      }
      if (entry.state === "done" && entry.withheld === true) {
        const error = new SecretShownOnceError(entry.status, entry.headers?.location);
        return { kind: "replay", reply: { status: error.status }, error };
      }
      if (entry.state === "done") {
        const reply: RouteReply = {
          status: entry.status,
          ...(entry.body === undefined ? {} : { body: entry.body }),
          headers: { ...entry.headers, "idempotency-replayed": "true" },
        };
        return entry.error
          ? {
              kind: "replay",
              reply,
              error: new SvcError(entry.error.code as ErrorCode, entry.error.detail, {
                extensions: entry.error.extensions,
              }),
            }
          : { kind: "replay", reply };
      }
      if (Date.now() - entry.at < this.abandonAfterMs) {
        throw new ConflictError("A request with this Idempotency-Key is still being processed; retry later.");
      }
      // Abandoned: take it over.
      try {
        await kv.update(
          kvKey,
          JSON.stringify({ state: "in-flight", fingerprint, at: Date.now() } satisfies InFlight),
          existing.revision,
        );
        return this.running(kv, kvKey, fingerprint, options.withholdReply === true);
      } catch {
        // raced: read again
      }
    }
    throw new ConflictError("A request with this Idempotency-Key is still being processed; retry later.");
  }

  private running(kv: KV, kvKey: string, fingerprint: string, withhold: boolean): Claim {
    return {
      kind: "run",
      forward: { key: kvKey, fingerprint },
      finish: async (result) => {
        const done: Done = {
          state: "done",
          fingerprint,
          ...(withhold
            ? withheldReply(result)
            : {
                status: result.status,
                ...(result.headers ? { headers: { ...result.headers } } : {}),
                ...(result.body === undefined ? {} : { body: result.body }),
              }),
        };
        await kv.put(kvKey, JSON.stringify(done)).catch(() => undefined);
      },
      fail: async (error) => {
        if (error instanceof SvcError && error.status < 500) {
          const done: Done = {
            state: "done",
            fingerprint,
            status: error.status,
            error: { code: error.code, detail: error.message, extensions: { ...error.extensions } },
          };
          await kv.put(kvKey, JSON.stringify(done)).catch(() => undefined);
        } else {
          // Not a final answer: the client may retry with the same key.
          await kv.delete(kvKey).catch(() => undefined);
        }
      },
    };
  }
}
