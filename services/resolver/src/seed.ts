/** The development stack's demo tenant and visible workspace, bound to the local host names (idempotent). */
import { type Db, sql } from "@svc/db";

export async function seedDemoWorkspace(
  db: Db,
  demo: { tenantKey: string; workspaceKey: string; hosts: readonly string[] },
): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query(sql`
      INSERT INTO resolver.tenants (key, name) VALUES (${demo.tenantKey}, 'Demo tenant')
      ON CONFLICT (key) DO NOTHING`);
    await tx.query(sql`
      INSERT INTO resolver.workspaces (key, tenant_key, name, type)
      VALUES (${demo.workspaceKey}, ${demo.tenantKey}, 'Default workspace', 'base')
      ON CONFLICT (key) DO NOTHING`);
    await tx.query(sql`
      INSERT INTO resolver.workspace_bindings (workspace_key, host, path_prefix)
      SELECT ${demo.workspaceKey}, h, '/' FROM unnest(${[...demo.hosts]}::text[]) AS h
      ON CONFLICT (host, path_prefix) DO NOTHING`);
    // The hosts are the demo tenant's.
    await tx.query(sql`
      INSERT INTO resolver.tenant_hosts (host, tenant_key)
      SELECT h, ${demo.tenantKey} FROM unnest(${[...demo.hosts]}::text[]) AS h
      ON CONFLICT (host) DO NOTHING`);
  });
}
