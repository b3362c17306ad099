/** What rbac seeds at every start (idempotently): the core keys, the system roles and configured roles. */
import { CORE_PERMISSION_KEYS, SYSTEM_ROLES } from "@svc/access";
import type { Config } from "@svc/config";
import { type Db, sql } from "@svc/db";

/** Seeds (idempotently, at every start) the core keys, the system roles and roles from settings. */
export async function seedAccess(db: Db, config: Config): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query(sql`
      INSERT INTO rbac.permission_keys (key, source)
      SELECT k, 'core' FROM unnest(${[...CORE_PERMISSION_KEYS]}::text[]) AS k
      ON CONFLICT (key) DO NOTHING`);
    for (const role of SYSTEM_ROLES) {
      // superadmin and admin keep their seeded grants; host.api's grants are the operators' to change.
      await tx.query(sql`
        INSERT INTO rbac.roles (name, description, scope, permissions, source)
        VALUES (${role.name}, ${role.description}, ${role.scope}, ${[...role.permissions]}::text[], 'system')
        ON CONFLICT (name) DO UPDATE SET
          permissions = CASE WHEN rbac.roles.name = 'host.api' THEN rbac.roles.permissions ELSE excluded.permissions END,
          scope = excluded.scope, source = 'system'`);
    }
    for (const role of config.backendHost.rbacRoles) {
      await tx.query(sql`
        INSERT INTO rbac.roles (name, description, scope, permissions, source)
        VALUES (${role.name}, 'Configured in BackendHost:RbacRoles', 'platform', ${[...role.permissions]}::text[], 'config')
        ON CONFLICT (name) DO UPDATE SET permissions = excluded.permissions, updated_at = now()
        WHERE rbac.roles.source <> 'system'`);
    }
  });
}
