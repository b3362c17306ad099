/**
 * Installed plugins' declared permission keys in the key catalogue: each key with its plugin id as
 * `source`, removed when the plugin is uninstalled. And which plugins are active in which workspace's chain,
 * for the keys of workspace sessions. Kept in step with the plugin registry by `followContributions`.
 */
import type { PluginContribution } from "@svc/contracts";
import { type Db, sql, withRetry } from "@svc/db";

export async function applyPluginKeys(db: Db, plugins: readonly PluginContribution[]): Promise<void> {
  const keys = plugins.flatMap((p) => p.permissions.map((key) => ({ key, source: p.pluginId })));
  // Replicas apply the same set at the same moment: a deadlock between them (40P01) is run again.
  await withRetry(() =>
    db.transaction(async (tx) => {
      // Keys of plugins no longer installed, or no longer declared, go; core keys are never touched.
      await tx.query(sql`
      DELETE FROM rbac.permission_keys
      WHERE source <> 'core'
        AND (key, source) NOT IN (SELECT * FROM unnest(${keys.map((k) => k.key)}::text[], ${keys.map((k) => k.source)}::text[]))`);
      await tx.query(sql`
      INSERT INTO rbac.permission_keys (key, source, description)
      SELECT k, s, 'Declared by plugin ' || s
      FROM unnest(${keys.map((k) => k.key)}::text[], ${keys.map((k) => k.source)}::text[]) AS t(k, s)
      ON CONFLICT (key) DO NOTHING`);
    }),
  );
}

/** The plugins that are active and in a workspace's chain: the ones whose keys its sessions may carry. */
export class ActivePluginsByWorkspace {
  private byWorkspace = new Map<string, ReadonlySet<string>>();

  apply(plugins: readonly PluginContribution[]): void {
    const next = new Map<string, Set<string>>();
    for (const p of plugins) {
      if (p.state !== "active") continue;
      for (const wk of p.workspaces) {
        const set = next.get(wk) ?? new Set<string>();
        set.add(p.pluginId);
        next.set(wk, set);
      }
    }
    this.byWorkspace = next;
  }

  of(workspaceKey: string): ReadonlySet<string> {
    return this.byWorkspace.get(workspaceKey) ?? new Set();
  }
}
