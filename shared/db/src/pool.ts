import { createPool, type DatabasePool, sql } from "slonik";

export interface PoolOptions {
  readonly databaseUrl: string;
  readonly maximumPoolSize: number;
  /** Name reported in pg_stat_activity. */
  readonly applicationName: string;
  /** Per-statement limit, ms. */
  readonly statementTimeoutMs?: number;
}

/**
 * A slonik pool with bounded waits everywhere: a connection attempt, a statement and an idle transaction
 * each time out, so a stuck database shows up as an error (and a 503 at /ready), never as a hang.
 */
export async function createDbPool(options: PoolOptions): Promise<DatabasePool> {
  const url = new URL(options.databaseUrl);
  url.searchParams.set("application_name", options.applicationName);
  return createPool(url.toString(), {
    maximumPoolSize: options.maximumPoolSize,
    connectionTimeout: 3_000,
    idleTimeout: 30_000,
    statementTimeout: options.statementTimeoutMs ?? 30_000,
    idleInTransactionSessionTimeout: 60_000,
    // Retries are ours (withRetry), limited to what PostgreSQL says is retryable.
    connectionRetryLimit: 1,
    queryRetryLimit: 0,
    transactionRetryLimit: 0,
    captureStackTrace: false,
  });
}

/** True when `SELECT 1` answers within the timeout. */
export async function dbIsReachable(pool: DatabasePool, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      pool.oneFirst(sql.unsafe`SELECT 1`).then(() => true),
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
