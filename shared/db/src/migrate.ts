import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";

import pg from "pg";
import minify from "pg-minify";

import { COMMENTS_EDITED } from "./legacy-checksums.js";

/**
 * One service's numbered migrations: `NNNN_description.sql` files applied in order, recorded under the
 * service's name. They may come from several directories (a library brings the tables it owns into the
 * schema of the service that runs it: @svc/jobs's into job_reaper); a version is one file in all of them.
 */
export interface MigrationSource {
  readonly service: string;
  readonly directory: string;
  /** Further directories whose files join the service's sequence. */
  readonly alsoFrom?: readonly string[];
}

export interface AppliedMigration {
  readonly service: string;
  readonly version: number;
  readonly name: string;
}

const FILE_PATTERN = /^(\d{4})_([a-z0-9_]+)\.sql$/;
/** Any fixed number: every migrator in any process takes this advisory lock, so they never interleave. */
const MIGRATION_LOCK_KEY = 7_301_984_221;

async function filesOf(directory: string): Promise<string[]> {
  try {
    return await readdir(directory);
  } catch {
    return [];
  }
}

/**
 * A migration's checksum: `v2:` and the SHA-256 of its statements without comments and with whitespace
 * collapsed (pg-minify), so that a comment may be mended in an applied migration while any change to what
 * it runs is refused. Earlier checksums were of the whole file: `legacyChecksums` accepts those once.
 */
export function statementChecksum(text: string, file: string): string {
  let statements: string;
  try {
    statements = minify(text);
  } catch (error) {
    throw new Error(`migration ${file}: ${(error as Error).message}`);
  }
  return `v2:${createHash("sha256").update(statements).digest("hex")}`;
}

/** A source's migrations in version order; a version found twice (in one or two directories) is an error. */
export async function listMigrations(source: MigrationSource) {
  const migrations = [];
  const seen = new Map<number, string>();
  for (const directory of [source.directory, ...(source.alsoFrom ?? [])]) {
    for (const file of await filesOf(directory)) {
      const match = FILE_PATTERN.exec(file);
      if (!match) {
        if (file.endsWith(".sql"))
          throw new Error(`migration ${source.service}/${file}: name must be NNNN_name.sql`);
        continue;
      }
      const version = Number(match[1]);
      const path = join(directory, file);
      const other = seen.get(version);
      if (other !== undefined) {
        throw new Error(`migration ${source.service}/${version}: both ${other} and ${path} claim it`);
      }
      seen.set(version, path);
      const text = await readFile(path, "utf8");
      migrations.push({
        version,
        name: match[2] as string,
        text,
        checksum: statementChecksum(text, `${source.service}/${file}`),
        legacyChecksums: new Set([
          createHash("sha256").update(text).digest("hex"),
          ...(COMMENTS_EDITED[`${source.service}/${version}`] ?? []),
        ]),
      });
    }
  }
  return migrations.sort((a, b) => a.version - b.version);
}

/**
 * Applies every pending migration of every source, each in its own transaction, under one advisory lock.
 * An applied migration whose statements have changed since is an error: migrations are append-only (their
 * comments may be mended).
 */
export async function migrate(
  databaseUrl: string,
  sources: readonly MigrationSource[],
): Promise<AppliedMigration[]> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: "svc-migrate" });
  await client.connect();
  const applied: AppliedMigration[] = [];
  try {
    await client.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK_KEY]);
    await client.query(`
      CREATE TABLE IF NOT EXISTS public.svc_schema_migrations (
        service    text        NOT NULL,
        version    integer     NOT NULL,
        name       text        NOT NULL,
        checksum   text        NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (service, version)
      )`);
    for (const source of sources) {
      const { rows } = await client.query<{ version: number; checksum: string }>(
        "SELECT version, checksum FROM public.svc_schema_migrations WHERE service = $1",
        [source.service],
      );
      const done = new Map(rows.map((r) => [r.version, r.checksum]));
      for (const migration of await listMigrations(source)) {
        const previous = done.get(migration.version);
        if (previous !== undefined) {
          if (previous === migration.checksum) continue;
          // Recorded by an earlier version of the migrator (the whole file's checksum): the file as it was
          // then, or as it was before its comments were mended. From now on its statements' checksum.
          if (migration.legacyChecksums.has(previous)) {
            await client.query(
              "UPDATE public.svc_schema_migrations SET checksum = $3 WHERE service = $1 AND version = $2",
              [source.service, migration.version, migration.checksum],
            );
            continue;
          }
          throw new Error(
            `migration ${source.service}/${migration.version} (${migration.name}) changed after it was applied`,
          );
        }
        await client.query("BEGIN");
        try {
          await client.query(migration.text);
          await client.query(
            "INSERT INTO public.svc_schema_migrations (service, version, name, checksum) VALUES ($1, $2, $3, $4)",
            [source.service, migration.version, migration.name, migration.checksum],
          );
          await client.query("COMMIT");
        } catch (error) {
          await client.query("ROLLBACK");
          throw new Error(`migration ${source.service}/${migration.version} (${migration.name}) failed`, {
            cause: error,
          });
        }
        applied.push({ service: source.service, version: migration.version, name: migration.name });
      }
    }
  } finally {
    await client.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK_KEY]).catch(() => undefined);
    await client.end();
  }
  return applied;
}

/** Creates the database named in the URL when it does not exist (connecting to `postgres` to do so). */
export async function ensureDatabase(databaseUrl: string): Promise<boolean> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  if (!/^[A-Za-z0-9_]+$/.test(name)) throw new Error(`unsupported database name ${JSON.stringify(name)}`);
  url.pathname = "/postgres";
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    const { rowCount } = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (rowCount === 0) {
      await client.query(`CREATE DATABASE "${name}"`).catch((error: { code?: string }) => {
        if (error.code !== "42P04") throw error; // created concurrently
      });
      return true;
    }
    return false;
  } finally {
    await client.end();
  }
}
