export { createDb, Db, dbIsReachable, type PoolOptions, Queries, type Transaction } from "./pool.js";
export { type AppliedMigration, ensureDatabase, type MigrationSource, migrate } from "./migrate.js";
export { isRetryableDbError, type RetryOptions, withRetry } from "./retry.js";
export { empty, join, raw, default as sql, type Sql } from "sql-template-tag";
