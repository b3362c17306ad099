import { useState } from "preact/hooks";

import { call } from "./api.js";
import { session } from "./session.js";
import { useLoad } from "./ui.js";

/**
 * The workspace a page is about, chosen from the workspaces the session may read: the session's own at
 * first (a workspace session's), else the first listed. Returns the key, the picker to show and the list's
 * error.
 */
export function useWorkspaceChoice() {
  const workspaces = useLoad(() => call("workspaces.list", { query: { limit: 100 } }));
  const [workspace, setWorkspace] = useState("");
  const chosen = workspace || session.get()?.workspaceKey || workspaces.data?.items[0]?.workspaceKey || "";
  const picker = (
    <label>
      <span>Workspace</span>
      <select value={chosen} onChange={(e) => setWorkspace(e.currentTarget.value)}>
        {(workspaces.data?.items ?? []).map((w) => (
          <option key={w.workspaceKey} value={w.workspaceKey}>
            {w.workspaceKey} ({w.name})
          </option>
        ))}
      </select>
    </label>
  );
  return { chosen, picker, error: workspaces.error };
}

/** The tenant a section is about, chosen from the tenants the session may read (the first at first). */
export function useTenantChoice() {
  const tenants = useLoad(() => call("tenants.list", { query: { limit: 100 } }));
  const [tenant, setTenant] = useState("");
  const chosen = tenant || tenants.data?.items[0]?.tenantKey || "";
  const picker = (
    <label>
      <span>Tenant</span>
      <select value={chosen} onChange={(e) => setTenant(e.currentTarget.value)}>
        {(tenants.data?.items ?? []).map((t) => (
          <option key={t.tenantKey} value={t.tenantKey}>
            {t.tenantKey} ({t.name})
          </option>
        ))}
      </select>
    </label>
  );
  return { chosen, picker, error: tenants.error, reload: tenants.reload };
}
