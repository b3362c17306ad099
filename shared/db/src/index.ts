export { deleteInBatches, deleteOlderThan, type SweepOptions } from "./batches.js";
export { type CursorFieldKind, type Listing, readPage, toPage } from "./cursor.js";
export { type Listener, listenForNotifications, type ListenOptions } from "./listen.js";
export { type AppliedMigration, ensureDatabase, migrate, type MigrationSource } from "./migrate.js";
export {
  afterCommit,
  createDb,
  Db,
  dbIsReachable,
  isReadOnly,
  outsideUnitOfWork,
  type PoolOptions,
  Queries,
  type StatementObserver,
  type StatementObservers,
  type Transaction,
} from "./pool.js";
export {
  isDataException,
  isForeignKeyViolation,
  isUniqueViolation,
  type RetryOptions,
  sqlState,
  withRetry,
} from "./retry.js";
export { isUuid } from "./uuid.js";
export { empty, join, raw, type Sql, default as sql } from "sql-template-tag";
