/**
 * The signed-in session, held in memory only (docs/adr/0016-admin-console.md): the access token never
 * touches storage a script could read later; a reload signs out. The token's claims say what the console
 * shows: its permission keys, scope and workspace, the user's name, and when it expires.
 */
import { signal } from "./state.js";

export interface Session {
  readonly token: string;
  readonly name: string;
  readonly scope: "platform" | "workspace" | null;
  readonly workspaceKey: string | null;
  readonly permissions: readonly string[];
  readonly roles: readonly string[];
  readonly expiresAtMs: number;
}

export const session = signal<Session | null>(null);
/** Why the last session ended, shown on the sign-in page. */
export const endedBecause = signal<string | null>(null);

let expiry: ReturnType<typeof setTimeout> | undefined;

function claimsOf(token: string): Record<string, unknown> {
  const part = token.split(".")[1] ?? "";
  const json = atob(part.replace(/-/g, "+").replace(/_/g, "/"));
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(json, (c) => c.charCodeAt(0)))) as Record<
    string,
    unknown
  >;
}

const strings = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);

export function start(token: string): void {
  const c = claimsOf(token);
  const expiresAtMs = typeof c.exp === "number" ? c.exp * 1000 : Date.now() + 3_600_000;
  session.set({
    token,
    name: typeof c.name === "string" ? c.name : typeof c.sub === "string" ? c.sub : "",
    scope: c.svc_scope === "platform" || c.svc_scope === "workspace" ? c.svc_scope : null,
    workspaceKey: typeof c.workspace_key === "string" ? c.workspace_key : null,
    permissions: strings(c.permission),
    roles: strings(c.role),
    expiresAtMs,
  });
  endedBecause.set(null);
  clearTimeout(expiry);
  expiry = setTimeout(
    () => end("Your session expired: sign in again."),
    Math.max(0, expiresAtMs - Date.now()),
  );
}

export function end(reason: string | null): void {
  clearTimeout(expiry);
  session.set(null);
  endedBecause.set(reason);
}

/** Whether the session holds the key (superadmin and `*` hold every key). */
export function can(key: string): boolean {
  const s = session.get();
  if (s === null) return false;
  return s.roles.includes("superadmin") || s.permissions.includes("*") || s.permissions.includes(key);
}
