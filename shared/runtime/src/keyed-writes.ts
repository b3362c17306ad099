/**
 * The outcome of every operator write sent with an `Idempotency-Key`, kept by the service that makes the
 * change, in the same transaction. The gateway's key store (a NATS KV bucket) answers
 * most retries on its own, but it releases a key after a 5xx, and it is lost with NATS's store: a commit
 * made just before a 504, or whose answer was lost with a killed process, then ran again. Here the first
 * request's answer is written in the transaction of its change, so a retry after any fault either finds
 * the change and its answer (and gets that answer again) or finds neither (and runs).
 *
 * - `transaction` mode: the handler runs as one unit of work (`Db.unitOfWork`): every statement it makes
 *   joins the transaction that holds the outcome row, and announcements wait for the commit. A second
 *   request with the key while the first runs is a 409 (a transaction-scoped advisory lock on the key);
 *   once the first has committed, it replays the first's answer.
 * - `after-handler` mode (the plugin registry, whose handlers start plugin processes and wait on other
 *   connections): the outcome is written right after the handler; a process killed between the change
 *   and that write leaves the change without its answer, and a retry runs again.
 *
 * A 4xx answer is kept too (the handler's changes are rolled back to a savepoint first); a 5xx is not, and
 * rolls everything back. Outcomes are kept 24 hours, like the gateway's keys.
 */
import { createHash } from "node:crypto";

import { type KeyedWrites, type RouteReply, type WithheldReply, withheldReply } from "@svc/bus";
import { type Db, type Queries, raw, sql } from "@svc/db";
import { ErrorCode, SecretShownOnceError, SvcError } from "@svc/errors";

export type KeyedWritesMode = "transaction" | "after-handler";

const stillRunning = () =>
  new SvcError(
    ErrorCode.Conflict,
    "A request with this Idempotency-Key is still being processed; retry later.",
  );

const KEEP = raw("interval '24 hours'");
const SWEEP_EVERY_MS = 10 * 60_000;

interface OutcomeRow {
  fingerprint: string;
  status: number | null;
  reply: unknown;
  error: { code: string; detail: string; extensions: Record<string, unknown> } | null;
}

type Outcome<T> = { readonly reply: T } | { readonly error: SvcError };

export class KeyedOutcomes implements KeyedWrites {
  private readonly table;
  private lastSweep = 0;

  constructor(
    private readonly db: Db,
    /** The service's schema, which holds `idempotency_outcomes`. */
    schema: string,
    private readonly mode: KeyedWritesMode,
  ) {
    if (!/^[a-z_]+$/.test(schema)) throw new Error(`not a schema name: ${schema}`);
    this.table = raw(`${schema}.idempotency_outcomes`);
  }

  async run<T>(
    scopedKey: string,
    fingerprint: string,
    work: () => Promise<T>,
    options: { readonly withholdReply?: boolean } = {},
  ): Promise<T> {
    this.sweep();
    const withhold = options.withholdReply === true;
    const key = createHash("sha256").update(scopedKey).digest("base64url");
    const outcome =
      this.mode === "transaction"
        ? await this.db.unitOfWork(async (tx) => {
            // Another request with this key still running (its client gave up, a 504, and asked again):
            // 409 at once, as the gateway answers, rather than a connection held waiting for it (under
            // load, retries waiting on one slow request took the whole pool).
            const free = await tx.one<{ free: boolean }>(sql`
              SELECT pg_try_advisory_xact_lock(hashtext('keyed-writes'), hashtext(${key})) AS free`);
            if (!free.free) throw stillRunning();
            // An outcome older than 24 hours is replaced.
            const claimed = await tx.maybeOne(sql`
              INSERT INTO ${this.table} (key, fingerprint) VALUES (${key}, ${fingerprint})
              ON CONFLICT (key) DO UPDATE
                SET fingerprint = EXCLUDED.fingerprint, status = NULL, reply = NULL, error = NULL,
                    created_at = now()
                WHERE ${this.table}.created_at < now() - ${KEEP}
              RETURNING key`);
            if (claimed === null) return this.replay<T>(await this.read(key), fingerprint);
            const result = await this.attempt(() => this.db.transaction(() => work()));
            await this.keep(tx, key, fingerprint, result, "update", withhold);
            return result;
          })
        : await this.runThenKeep(key, fingerprint, work, withhold);
    if ("error" in outcome) throw outcome.error;
    return outcome.reply;
  }

  private async runThenKeep<T>(
    key: string,
    fingerprint: string,
    work: () => Promise<T>,
    withhold: boolean,
  ): Promise<Outcome<T>> {
    const existing = await this.read(key);
    if (existing !== null) return this.replay<T>(existing, fingerprint);
    const result = await this.attempt(work);
    await this.keep(this.db, key, fingerprint, result, "insert", withhold);
    return result;
  }

  /** The handler's answer, or its 4xx error (a final answer); any other failure is thrown. */
  private async attempt<T>(work: () => Promise<T>): Promise<Outcome<T>> {
    try {
      return { reply: await work() };
    } catch (error) {
      if (error instanceof SvcError && error.status < 500) return { error };
      throw error;
    }
  }

  private async read(key: string): Promise<OutcomeRow | null> {
    return this.db.maybeOne<OutcomeRow>(sql`
      SELECT fingerprint, status, reply, error FROM ${this.table}
      WHERE key = ${key} AND status IS NOT NULL AND created_at >= now() - ${KEEP}`);
  }

  private replay<T>(row: OutcomeRow | null, fingerprint: string): Outcome<T> {
    // Only an outcome being replaced meanwhile; the client retries.
    if (row === null) throw stillRunning();
    if (row.fingerprint !== fingerprint) {
      throw new SvcError(
        ErrorCode.IdempotencyKeyReused,
        "This Idempotency-Key was used with a different request.",
      );
    }
    if (row.error !== null) {
      return {
        error: new SvcError(row.error.code as ErrorCode, row.error.detail, {
          extensions: row.error.extensions,
        }),
      };
    }
    const reply = row.reply as { headers?: Record<string, string> } | WithheldReply;
    if ("withheld" in reply)
      return { error: new SecretShownOnceError(reply.status, reply.headers?.location) };
    return { reply: { ...reply, headers: { ...reply.headers, "idempotency-replayed": "true" } } as T };
  }

  private async keep<T>(
    target: Pick<Queries, "query">,
    key: string,
    fingerprint: string,
    outcome: Outcome<T>,
    how: "insert" | "update",
    withhold: boolean,
  ): Promise<void> {
    const status =
      "error" in outcome ? outcome.error.status : ((outcome.reply as { status?: number }).status ?? 200);
    // A secret shown once is kept nowhere: only the reply's status and location.
    const reply =
      "error" in outcome
        ? null
        : JSON.stringify(withhold ? withheldReply(outcome.reply as RouteReply) : outcome.reply);
    const error =
      "error" in outcome
        ? JSON.stringify({
            code: outcome.error.code,
            detail: outcome.error.message,
            extensions: outcome.error.extensions,
          })
        : null;
    await target.query(
      how === "update"
        ? sql`UPDATE ${this.table} SET status = ${status}, reply = ${reply}::jsonb, error = ${error}::jsonb
              WHERE key = ${key}`
        : sql`INSERT INTO ${this.table} (key, fingerprint, status, reply, error)
              VALUES (${key}, ${fingerprint}, ${status}, ${reply}::jsonb, ${error}::jsonb)
              ON CONFLICT (key) DO NOTHING`,
    );
  }

  /** Drops outcomes older than 24 hours, at most every ten minutes per process, in the background. */
  private sweep(): void {
    if (Date.now() - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = Date.now();
    this.db.query(sql`DELETE FROM ${this.table} WHERE created_at < now() - ${KEEP}`).catch(() => undefined);
  }
}
