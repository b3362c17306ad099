import { AsyncLocalStorage } from "node:async_hooks";
import { createHash } from "node:crypto";

import { checkDeadline } from "@svc/errors";
import { inSpan, Observers, SpanKind, tracingEnabled } from "@svc/observability";
import pg from "pg";
import type { Sql } from "sql-template-tag";

export interface PoolOptions {
  readonly databaseUrl: string;
  readonly maximumPoolSize: number;
  /** Name reported in pg_stat_activity. */
  readonly applicationName: string;
  /** Per-statement limit, ms. */
  readonly statementTimeoutMs?: number;
  /** Called when an idle connection fails (the pool drops it and opens a new one when needed). */
  readonly onIdleError?: (error: Error) => void;
}

/** What a query runs on: the pool, or one connection inside a transaction. */
interface Queryable {
  query<R extends pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>>;
}

/**
 * A unit of work (`Db.unitOfWork`): every statement a Db runs inside it, from whatever code, joins its one
 * transaction, a nested `transaction` becomes a savepoint, and effects announced with `afterCommit` wait
 * for the commit (they are dropped when their savepoint or the unit rolls back).
 */
interface Unit {
  readonly db: Db;
  readonly tx: Queries;
  readonly client: pg.PoolClient;
  savepoints: number;
  readonly afterCommit: Array<() => void>;
}
const units = new AsyncLocalStorage<Unit>();

/**
 * Runs `effect` (a broadcast that makes others read what was just written) once the data it announces is
 * committed: at once outside a unit of work, after its COMMIT inside one, never when it rolls back.
 */
export function afterCommit(effect: () => void): void {
  const unit = units.getStore();
  if (unit === undefined) effect();
  else unit.afterCommit.push(effect);
}

/**
 * Runs `work` outside any unit of work: the statements it makes, however deep, run on the pool (each on
 * its own, or in a transaction of its own), never in a caller's transaction. For machinery whose commits
 * must neither wait for a caller's nor change how it commits (the job engine's claims).
 */
export function outsideUnitOfWork<T>(work: () => T): T {
  return units.exit(work);
}

/**
 * Every statement runs as a named prepared statement, named by a digest of its text: PostgreSQL parses and
 * plans it once per connection instead of on every call (3–5× the throughput for short queries here).
 * Values always travel as parameters, so the text, and the number of names, stays small and fixed.
 */
const names = new Map<string, string>();
function statementName(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    name = `q_${createHash("sha1").update(text).digest("hex").slice(0, 20)}`;
    if (names.size < 10_000) names.set(text, name);
  }
  return name;
}

/**
 * An observer of a Db's statements (the diagnostics recorder's): each statement's text and values, how
 * long it took, and the error when it failed. It must not block.
 */
export type StatementObserver = (statement: Sql, durationMs: number, error?: unknown) => void;

/** What a Db shares with its transactions: the observers of its statements. */
export type StatementObservers = Observers<Parameters<StatementObserver>>;

/**
 * Typed queries over a node-postgres pool. Every statement is an `sql` template (values always travel
 * as parameters, never spliced into text); rows are typed by the caller. See ADR 0002 for why this is not
 * slonik.
 */
export class Queries {
  constructor(
    protected readonly target: Queryable,
    /** Told of every statement (the diagnostics recorder adds one while it records). */
    readonly statements: StatementObservers = new Observers(),
  ) {}

  async query<R extends pg.QueryResultRow = pg.QueryResultRow>(statement: Sql): Promise<pg.QueryResult<R>> {
    // Work for a request whose caller has given up is not started.
    checkDeadline();
    if (!tracingEnabled()) return this.run<R>(statement);
    // Each statement in its own span (OpenTelemetry database conventions): its text, which holds
    // placeholders and never a value, and its first keyword as the operation.
    const operation = /^\s*(\w+)/.exec(statement.text)?.[1]?.toUpperCase() ?? "QUERY";
    const text = statement.text;
    return inSpan(
      "postgresql",
      operation,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          "db.system.name": "postgresql",
          "db.operation.name": operation,
          "db.query.text": text.length > 2_000 ? `${text.slice(0, 2_000)}…` : text,
        },
      },
      () => this.run<R>(statement),
    );
  }

  private async run<R extends pg.QueryResultRow>(statement: Sql): Promise<pg.QueryResult<R>> {
    const config = { name: statementName(statement.text), text: statement.text, values: statement.values };
    const observers = this.statements;
    if (observers.empty) return this.target.query<R>(config);
    const started = performance.now();
    try {
      const result = await this.target.query<R>(config);
      observers.notify(statement, performance.now() - started);
      return result;
    } catch (error) {
      observers.notify(statement, performance.now() - started, error);
      throw error;
    }
  }

  async any<R extends pg.QueryResultRow>(statement: Sql): Promise<R[]> {
    return (await this.query<R>(statement)).rows;
  }

  /** The one row, or null; more than one row is a programming error. */
  async maybeOne<R extends pg.QueryResultRow>(statement: Sql): Promise<R | null> {
    const { rows } = await this.query<R>(statement);
    if (rows.length > 1) throw new Error(`expected at most one row, got ${rows.length}`);
    return rows[0] ?? null;
  }

  async one<R extends pg.QueryResultRow>(statement: Sql): Promise<R> {
    const row = await this.maybeOne<R>(statement);
    if (row === null) throw new Error("expected one row, got none");
    return row;
  }
}

function runEffects(effects: ReadonlyArray<() => void>): void {
  for (const effect of effects) {
    try {
      effect();
    } catch {
      // an announcement that fails is the announcer's to report; the commit stands
    }
  }
}

export type Transaction = Queries;

/**
 * The connection was lost under the statement: terminated by an administrator or a failover (57P01,
 * 57P02), or dropped. The statement may or may not have run.
 */
export function isConnectionLost(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  if (e === null || typeof e !== "object") return false;
  if (e.code === "57P01" || e.code === "57P02" || e.code === "ECONNRESET" || e.code === "EPIPE") return true;
  return (
    typeof e.message === "string" &&
    /^(Connection terminated|Client (has encountered a connection error|was closed) and is not queryable)/.test(
      e.message,
    )
  );
}

/** What Node says when a connection to the server cannot be made (the server down, moving, or unnamed). */
const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
]);

/**
 * A connection to the database could not be had (the server is down or a failover is under way): said as
 * SQLSTATE 08001 (`sqlclient_unable_to_establish_sqlconnection`), with Node's error as the cause, so that a
 * request meeting it answers 503 (errors' `fromUnexpected`), not 500. Anything else is returned as it is.
 */
export function unreachable(error: unknown): unknown {
  const e = error as { code?: unknown; syscall?: unknown } | null;
  if (e === null || typeof e !== "object" || typeof e.code !== "string" || !UNREACHABLE.has(e.code))
    return error;
  return Object.assign(new Error(`could not connect to the database (${e.code})`, { cause: error }), {
    code: "08001",
  });
}

/** A statement that only reads: safe to run again whether or not the first try ran. */
export function isReadOnly(text: string): boolean {
  return (
    /^\s*(SELECT|WITH|VALUES|SHOW)\b/i.test(text) &&
    !/\b(INSERT|UPDATE|DELETE|MERGE|FOR\s+(NO\s+KEY\s+)?UPDATE|FOR\s+(KEY\s+)?SHARE|nextval|setval|pg_notify)\b/i.test(
      text,
    )
  );
}

export class Db extends Queries {
  constructor(readonly pool: pg.Pool) {
    super(pool);
  }

  /**
   * Outside a transaction, a read whose connection was lost (a failover, `pg_terminate_backend`) is run
   * once more on a fresh connection instead of failing the request; writes are not, since they may have
   * run.
   */
  override async query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    statement: Sql,
  ): Promise<pg.QueryResult<R>> {
    const unit = units.getStore();
    if (unit?.db === this) {
      // A write on its own is atomic on its own, as outside a unit: a failure (a unique violation the
      // caller turns into a 409) rolls back that statement only, and the unit goes on.
      return isReadOnly(statement.text)
        ? unit.tx.query<R>(statement)
        : this.savepoint(unit, (tx) => tx.query<R>(statement));
    }
    for (let retry = 0; ; retry++) {
      try {
        return await super.query<R>(statement);
      } catch (error) {
        // Twice at most: the first retry can still meet another connection the same failover ended.
        if (retry >= 2 || !isConnectionLost(error) || !isReadOnly(statement.text)) throw unreachable(error);
      }
    }
  }

  /**
   * Runs `work` in a transaction: COMMIT when it resolves, ROLLBACK when it throws. A connection that is
   * lost while checked out (`pg_terminate_backend`, a failover) fails the transaction, never the process:
   * the client's `error` event has a listener for as long as it is out of the pool, and a lost client is
   * destroyed, not returned to the pool.
   */
  async transaction<T>(work: (tx: Transaction) => Promise<T>): Promise<T> {
    const unit = units.getStore();
    if (unit?.db === this) return this.savepoint(unit, work);
    return this.begin(work);
  }

  /**
   * Runs `work` as one unit of work: one transaction that every statement of this Db joins while `work`
   * runs, however deep in the call (`transaction` calls become savepoints), so that it commits or rolls
   * back as a whole; `afterCommit` effects run after the COMMIT. An Idempotency-Key's outcome is kept
   * this way, in the same transaction as the change it answers for.
   */
  async unitOfWork<T>(work: (tx: Transaction) => Promise<T>): Promise<T> {
    const existing = units.getStore();
    if (existing?.db === this) return this.savepoint(existing, work);
    const effects: Array<() => void> = [];
    const result = await this.begin((tx, client) =>
      units.run({ db: this, tx, client, savepoints: 0, afterCommit: effects }, () => work(tx)),
    );
    runEffects(effects);
    return result;
  }

  private async savepoint<T>(unit: Unit, work: (tx: Transaction) => Promise<T>): Promise<T> {
    const name = `svc_${++unit.savepoints}`;
    const effects = unit.afterCommit.length;
    await unit.client.query(`SAVEPOINT ${name}`);
    try {
      const result = await work(unit.tx);
      await unit.client.query(`RELEASE SAVEPOINT ${name}`);
      return result;
    } catch (error) {
      // When this fails too, the unit's COMMIT fails: nothing of it stands.
      if (!isConnectionLost(error))
        await unit.client.query(`ROLLBACK TO SAVEPOINT ${name}`).catch(() => undefined);
      unit.afterCommit.splice(effects);
      throw error;
    }
  }

  private async begin<T>(work: (tx: Transaction, client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect().catch((error: unknown) => {
      throw unreachable(error);
    });
    let lost: Error | undefined;
    const onError = (error: Error) => {
      lost = error;
    };
    client.on("error", onError);
    try {
      checkDeadline();
      await client.query("BEGIN");
      const result = await work(new Queries(client, this.statements), client);
      // Past the request's deadline the caller has answered 504: roll back rather than change anything.
      checkDeadline();
      await client.query("COMMIT");
      return result;
    } catch (error) {
      if (isConnectionLost(error)) lost ??= error as Error;
      if (lost === undefined) await client.query("ROLLBACK").catch(() => undefined);
      throw error;
    } finally {
      client.off("error", onError);
      client.release(lost);
    }
  }

  end(): Promise<void> {
    return this.pool.end();
  }
}

/**
 * A pool with bounded waits everywhere: a connection attempt, a statement and an idle transaction each time
 * out, so a stuck database shows up as an error (and a 503 at /ready), never as a hang. A connection that
 * dies while idle is dropped and reported, never crashes the process.
 */
export function createDb(options: PoolOptions): Db {
  const pool = new pg.Pool({
    connectionString: options.databaseUrl,
    application_name: options.applicationName,
    max: options.maximumPoolSize,
    connectionTimeoutMillis: 3_000,
    idleTimeoutMillis: 30_000,
    statement_timeout: options.statementTimeoutMs ?? 30_000,
    idle_in_transaction_session_timeout: 60_000,
    keepAlive: true,
  });
  pool.on("error", (error) => options.onIdleError?.(error));
  return new Db(pool);
}

/** True when `SELECT 1` answers within the timeout. */
export async function dbIsReachable(db: Db, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      db.pool.query("SELECT 1").then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      }),
    ]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
