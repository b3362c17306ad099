/**
 * For the handlers' unit tests: the tenants' host assignments in memory, following the PostgreSQL tables'
 * rules (a host has one tenant; a failed change leaves them as they were).
 */
import type { HostAssignment, HostChange, HostTables } from "./tenant-hosts.js";

export class MemoryHosts implements HostTables, HostChange {
  constructor(readonly tenants = new Set(["acme", "zeta"])) {}
  /** The tenant of each assigned host. */
  readonly assigned = new Map<string, string>();
  /** Bindings: workspace → tenant and hosts. */
  readonly bindings = new Map<string, { tenantKey: string; hosts: string[] }>();

  async tenantExists(tenantKey: string) {
    return this.tenants.has(tenantKey);
  }
  async assignments(tenantKey: string): Promise<HostAssignment[]> {
    return [...this.assigned]
      .filter(([, t]) => t === tenantKey)
      .map(([host, t]) => ({ host, tenantKey: t, createdAt: new Date(0) }))
      .sort((a, b) => a.host.localeCompare(b.host));
  }
  async change<T>(change: (tables: HostChange) => Promise<T>): Promise<T> {
    const before = new Map(this.assigned);
    try {
      return await change(this);
    } catch (error) {
      this.assigned.clear();
      for (const [k, v] of before) this.assigned.set(k, v);
      throw error;
    }
  }
  async owners(hosts: readonly string[]) {
    return new Map(hosts.flatMap((h) => (this.assigned.has(h) ? [[h, this.assigned.get(h) as string]] : [])));
  }
  async assign(hosts: readonly string[], tenantKey: string) {
    const made = hosts.filter((h) => !this.assigned.has(h));
    for (const h of made) this.assigned.set(h, tenantKey);
    return made.map((host) => ({ host, tenantKey, createdAt: new Date(0) }));
  }
  async assignment(host: string) {
    const tenantKey = this.assigned.get(host);
    return tenantKey === undefined ? null : { host, tenantKey, createdAt: new Date(0) };
  }
  async boundBy(host: string, tenantKey: string) {
    return (
      [...this.bindings].find(([, b]) => b.tenantKey === tenantKey && b.hosts.includes(host))?.[0] ?? null
    );
  }
  async release(host: string, tenantKey: string) {
    if (this.assigned.get(host) !== tenantKey) return false;
    this.assigned.delete(host);
    return true;
  }
}
