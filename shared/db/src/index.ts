export { createDbPool, dbIsReachable, type PoolOptions } from "./pool.js";
export { type AppliedMigration, ensureDatabase, type MigrationSource, migrate } from "./migrate.js";
export { isRetryableDbError, type RetryOptions, withRetry } from "./retry.js";
export { type DatabasePool, sql } from "slonik";
