/**
 * What the dev stack, the migrate command, the test harness and the benchmark share: where the services
 * and their migrations are, how to wait for a server, and the demo seed.
 */
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { connect as tcpConnect, createServer } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { ensureDatabase, migrate as runMigrations, type MigrationSource } from "@svc/db";
import pg from "pg";

/** The repository (or image) root: the nearest folder above this module that holds `services/`. */
function findRoot(start: string): string {
  let dir = start;
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, "services"))) return dir;
    dir = dirname(dir);
  }
  return start;
}

export const repoRoot = findRoot(dirname(fileURLToPath(import.meta.url)));

/** The six services, in start order. */
export const SERVICES = [
  "resolver",
  "rbac",
  "plugin-registry",
  "webhook-dispatcher",
  "job-reaper",
  "gateway",
] as const;
export type ServiceDir = (typeof SERVICES)[number];

export function migrationSources(): MigrationSource[] {
  return SERVICES.map((service) => ({
    service,
    directory: join(repoRoot, "services", service, "migrations"),
  })).filter((s) => existsSync(s.directory));
}

/** Creates the database if needed and applies every service's pending migrations. */
export async function migrateAll(databaseUrl: string) {
  await ensureDatabase(databaseUrl);
  return runMigrations(databaseUrl, migrationSources());
}

/** True when a TCP connection to host:port opens within the timeout. */
export function tcpReachable(host: string, port: number, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

/** A port nothing listens on right now (the kernel's choice for port 0). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Drops what a benchmark or harness run made for itself: its database and its events stream. */
export async function dropRunResources(o: {
  serverUrl: string;
  database: string;
  natsUrl: string;
  stream: string;
}): Promise<void> {
  const admin = new pg.Client({ connectionString: o.serverUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${o.database}" WITH (FORCE)`).catch(() => undefined);
  await admin.end();
  const { connect } = await import("@nats-io/transport-node");
  const { jetstreamManager } = await import("@nats-io/jetstream");
  const nc = await connect({ servers: o.natsUrl });
  await (await jetstreamManager(nc)).streams.delete(o.stream).catch(() => undefined);
  await nc.close();
}

export function hostPort(url: string, defaultPort: number): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname || "127.0.0.1", port: u.port ? Number(u.port) : defaultPort };
}

export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} did not come up within ${timeoutMs} ms`);
}

export const DEMO = {
  tenantKey: "demo",
  workspaceKey: "default",
  hosts: ["localhost", "127.0.0.1"],
  /** The demo operator (superadmin) of the development stack; never seeded outside development. */
  adminUserName: "admin",
  adminPassword: "admin-dev-password",
} as const;

/**
 * The demo tenant, the visible workspace `default` bound to localhost, and (with `withAdmin`) the demo
 * operator: user `admin` with the superadmin global role and a member of `default` with the admin role.
 * Idempotent.
 */
export async function seedDemo(databaseUrl: string, options: { withAdmin?: boolean } = {}): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query("BEGIN");
    await client.query(
      "INSERT INTO resolver.tenants (key, name) VALUES ($1, 'Demo tenant') ON CONFLICT (key) DO NOTHING",
      [DEMO.tenantKey],
    );
    await client.query(
      `INSERT INTO resolver.workspaces (key, tenant_key, name, type)
       VALUES ($1, $2, 'Default workspace', 'base') ON CONFLICT (key) DO NOTHING`,
      [DEMO.workspaceKey, DEMO.tenantKey],
    );
    await client.query(
      `INSERT INTO resolver.workspace_bindings (workspace_key, host, path_prefix)
       SELECT $1, h, '/' FROM unnest($2::text[]) AS h
       ON CONFLICT (host, path_prefix) DO NOTHING`,
      [DEMO.workspaceKey, DEMO.hosts],
    );
    if (options.withAdmin) {
      const { hashPassword } = await import("@svc/service-rbac");
      // The role rows exist before rbac first starts; rbac refreshes their grants at every start.
      await client.query(`
        INSERT INTO rbac.roles (name, scope, permissions, source) VALUES
          ('superadmin', 'platform', '{*}', 'system'),
          ('admin', 'workspace', '{membership.read,membership.update,membership.delete,user.read}', 'system')
        ON CONFLICT (name) DO NOTHING`);
      const existing = await client.query("SELECT id FROM rbac.users WHERE lower(user_name) = $1", [
        DEMO.adminUserName,
      ]);
      const id = existing.rows[0]?.id ?? randomUUID();
      if (existing.rowCount === 0) {
        await client.query(
          `INSERT INTO rbac.users (id, user_name, display_name, password_hash, global_role)
           VALUES ($1, $2, 'Demo operator', $3, 'superadmin')`,
          [id, DEMO.adminUserName, await hashPassword(DEMO.adminPassword)],
        );
      }
      await client.query(
        "INSERT INTO rbac.memberships (workspace_key, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        [DEMO.workspaceKey, id],
      );
      await client.query(
        "INSERT INTO rbac.membership_roles (workspace_key, user_id, role) VALUES ($1, $2, 'admin') ON CONFLICT DO NOTHING",
        [DEMO.workspaceKey, id],
      );
    }
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK");
    throw error;
  } finally {
    await client.end();
  }
}
