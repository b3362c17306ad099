/**
 * The console's API client, typed by the route contracts (@svc/contracts): each route the console calls is
 * listed with its method, path and permission key, and the compiler checks them against the contract, so a
 * contract change breaks the console's build, not its users. Only types are imported: no contract code is
 * shipped to the browser.
 */
import type {
  BodyOf,
  configRoutes,
  jobRoutes,
  mediaRoutes,
  pluginRegistryRoutes,
  QueryOf,
  rbacRoutes,
  ReplyBodyOf,
  resolverRoutes,
  webhookRoutes,
} from "@svc/contracts";

type Routes = typeof resolverRoutes &
  typeof configRoutes &
  typeof pluginRegistryRoutes &
  typeof rbacRoutes &
  typeof webhookRoutes &
  typeof jobRoutes &
  typeof mediaRoutes;
type Name = Extract<keyof Routes, string>;
type Entry<K extends Name> = readonly [Routes[K]["method"], Routes[K]["path"], Routes[K]["permission"]];

/** The routes the console calls: [method, path, permission], each checked against its contract. */
export const ROUTES = {
  "tenants.list": ["GET", "/api/tenants", "tenant.read"],
  "tenants.create": ["POST", "/api/tenants", "tenant.create"],
  "tenants.suspend": ["POST", "/api/tenants/:tenantKey/suspend", "tenant.update"],
  "tenants.activate": ["POST", "/api/tenants/:tenantKey/activate", "tenant.update"],
  "workspaces.list": ["GET", "/api/workspaces", "workspace.read"],
  "workspaces.put": ["PUT", "/api/workspaces/:workspaceKey", "workspace.update"],
  "users.list": ["GET", "/api/users", "user.read"],
  "users.create": ["POST", "/api/users", "user.create"],
  "users.export": ["GET", "/api/users/:userId/data-export", "user.read"],
  "members.list": ["GET", "/api/workspaces/:workspaceKey/members", ["membership.read", "workspace.read"]],
  "members.put": [
    "PUT",
    "/api/workspaces/:workspaceKey/members/:userId",
    ["membership.update", "workspace.update"],
  ],
  "members.delete": [
    "DELETE",
    "/api/workspaces/:workspaceKey/members/:userId",
    ["membership.delete", "workspace.update"],
  ],
  "member-roles.put": ["PUT", "/api/workspaces/:workspaceKey/members/:userId/roles", "membership.update"],
  "entitlements.list": ["GET", "/api/entitlements", "plugin.read"],
  "entitlements.put": ["PUT", "/api/entitlements", "plugin.execute"],
  "plugins.list": ["GET", "/api/plugins", "plugin.read"],
  "plugins.install": ["POST", "/api/plugins/install", "plugin.create"],
  "plugins.activate": ["POST", "/api/plugins/:id/activate", "plugin.execute"],
  "plugins.deactivate": ["POST", "/api/plugins/:id/deactivate", "plugin.execute"],
  "plugins.uninstall": ["DELETE", "/api/plugins/:id", "plugin.delete"],
  "plugins.signature-report": ["GET", "/api/plugins/signature-report", "plugin.read"],
  "plugins.audit": ["GET", "/api/plugins/audit", "plugin.read"],
  "signers.list": ["GET", "/api/plugins/security/trusted-signers", "plugin.read"],
  "assignments.get": ["GET", "/api/workspaces/:workspaceKey/plugins", "plugin.assign"],
  "assignments.put": ["PUT", "/api/workspaces/:workspaceKey/plugins", "plugin.assign"],
  "roles.list": ["GET", "/api/rbac/roles", "role.read"],
  "roles.put": ["PUT", "/api/rbac/roles/:role", "role.update"],
  "permissions.list": ["GET", "/api/rbac/permissions", "role.read"],
  "webhooks.list": ["GET", "/api/webhooks", "webhook.read"],
  "webhooks.create": ["POST", "/api/webhooks", "webhook.manage"],
  "webhooks.deliveries": ["GET", "/api/webhooks/:id/deliveries", "webhook.read"],
  "webhooks.resend": ["POST", "/api/webhooks/:id/deliveries/:deliveryId/resend", "webhook.manage"],
  "webhooks.circuit": ["GET", "/api/webhooks/:id/circuit", "webhook.read"],
  "webhooks.rotate-secret": ["POST", "/api/webhooks/:id/secret/rotate", "webhook.manage"],
  "webhooks.activation": ["PUT", "/api/webhooks/:id/activation", "webhook.manage"],
  "webhooks.delete": ["DELETE", "/api/webhooks/:id", "webhook.manage"],
  "flows.list": ["GET", "/api/flows", "flow.read"],
  "flows.delete": ["DELETE", "/api/flows/:id", "flow.manage"],
  "notifications.list": ["GET", "/api/notifications", "notification.read"],
  "notifications.read": ["PUT", "/api/notifications/:id/read", "notification.read"],
  "config.effective": ["GET", "/api/config/effective", "config.read"],
  "webhooks.delivery": ["GET", "/api/webhooks/:id/deliveries/:deliveryId", "webhook.read"],
  "events.catalog": ["GET", "/api/events/catalog", "flow.read"],
  "jobs.list": ["GET", "/api/jobs", "job.read"],
  "jobs.retry": ["POST", "/api/jobs/:id/retry", "job.execute"],
  "jobs.run-now": ["POST", "/api/jobs/:id/run-now", "job.execute"],
  "jobs.cancel": ["POST", "/api/jobs/:id/cancel", "job.execute"],
  "diagnostics.start": ["POST", "/api/diagnostics/recorder/start", "diagnostics.record"],
  "diagnostics.stop": ["POST", "/api/diagnostics/recorder/stop", "diagnostics.record"],
  "diagnostics.get": ["GET", "/api/diagnostics/recorder", "diagnostics.record"],
  "tenant-hosts.list": ["GET", "/api/tenants/:tenantKey/hosts", "tenant.read"],
  "tenant-hosts.put": ["PUT", "/api/tenants/:tenantKey/hosts/:host", "tenant.update"],
  "tenant-hosts.delete": ["DELETE", "/api/tenants/:tenantKey/hosts/:host", "tenant.update"],
  "plugins.install-feed": ["POST", "/api/plugins/install/nuget", "plugin.create"],
  "plugins.update-feed": ["POST", "/api/plugins/:id/update/nuget", "plugin.create"],
  "plugins.update-upload": ["POST", "/api/plugins/:id/update", "plugin.create"],
  "delegations.list": ["GET", "/api/tenants/:tenantKey/plugins/delegations", "plugin.assign"],
  "delegations.put": ["PUT", "/api/tenants/:tenantKey/plugins/:pluginId/delegation", "plugin.assign"],
  "themes.definitions": ["GET", "/api/themes/definitions", "extension.read"],
  "themes.definition-activation": [
    "PUT",
    "/api/themes/definitions/:templateKey/plugins/:pluginId/versions/:version/activation",
    "extension.update",
  ],
  "themes.workspace": ["GET", "/api/themes/workspaces/:workspaceKey", "extension.read"],
  "themes.workspace-put": ["PUT", "/api/themes/workspaces/:workspaceKey", "extension.update"],
  "themes.workspace-delete": ["DELETE", "/api/themes/workspaces/:workspaceKey", "extension.update"],
  "themes.settings": ["GET", "/api/themes/workspaces/:workspaceKey/settings", "extension.read"],
  "themes.settings-put": ["PUT", "/api/themes/workspaces/:workspaceKey/settings", "extension.update"],
  "surfaces.list": ["GET", "/api/surfaces", "workspace.read"],
  "surfaces.put": ["PUT", "/api/surfaces/:surfaceKey", "workspace.update"],
  "surfaces.delete": ["DELETE", "/api/surfaces/:surfaceKey", "workspace.update"],
  "snippets.list": ["GET", "/api/snippets", "snippet.read"],
  "snippets.put": ["PUT", "/api/snippets/:snippetKey", "snippet.update"],
  "snippets.delete": ["DELETE", "/api/snippets/:snippetKey", "snippet.update"],
  "flows.create": ["POST", "/api/flows", "flow.manage"],
  "flows.put": ["PUT", "/api/flows/:id", "flow.manage"],
  "custom-fields.definitions": ["GET", "/api/custom-fields/definitions", "customfield.read"],
  "custom-fields.get": ["GET", "/api/custom-fields/:entityName/:entityId", "customfield.read"],
  "custom-fields.put": ["PUT", "/api/custom-fields/:entityName/:entityId", "customfield.update"],
  "config.definitions": ["GET", "/api/config/definitions", "config.read"],
  "config.put": ["PUT", "/api/config/values", "config.update"],
  "media.list": ["GET", "/api/media", "media.read"],
  "media.upload": ["POST", "/api/media", "media.manage"],
  "media.content": ["GET", "/api/media/:id/content", "media.read"],
  "media.delete": ["DELETE", "/api/media/:id", "media.manage"],
  "integrations.list": ["GET", "/api/security/integrations", "integration.read"],
  "integrations.create": ["POST", "/api/security/integrations", "integration.manage"],
  "integrations.delete": ["DELETE", "/api/security/integrations/:id", "integration.manage"],
} as const satisfies { readonly [K in Name]?: Entry<K> };

export type RouteName = keyof typeof ROUTES;
export type Reply<K extends RouteName> = ReplyBodyOf<Routes[K]>;
export type Body<K extends RouteName> = BodyOf<Routes[K]>;
export type Query<K extends RouteName> = QueryOf<Routes[K]>;

/** An RFC 9457 problem the API answered, with the status and any Retry-After (seconds). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: {
      title?: string;
      detail?: string;
      code?: string;
      errors?: Array<{ field: string; message: string }>;
    },
    readonly retryAfter: number | null,
  ) {
    super(problem.detail ?? problem.title ?? `HTTP ${status}`);
  }

  /** One line for the operator: what failed, and when to try again. */
  describe(): string {
    // Each field's complaint, unless the detail already says it.
    const fields = (this.problem.errors ?? [])
      .filter((e) => !this.message.includes(e.message))
      .map((e) => `${e.field}: ${e.message}`)
      .join("; ");
    const when = this.retryAfter === null ? "" : ` Try again in ${this.retryAfter} s.`;
    const what =
      this.status === 403
        ? `Not allowed: ${this.message}`
        : this.status === 429
          ? `Too many requests.`
          : this.status === 503
            ? `The service is unavailable.`
            : this.message;
    return `${what}${fields ? ` (${fields})` : ""}${when}`;
  }
}

export interface Transport {
  token(): string | null;
  /** The session ended (401): back to sign-in with the reason. */
  expired(reason: string): void;
}

let transport: Transport = { token: () => null, expired: () => undefined };
export const useTransport = (t: Transport) => void (transport = t);

/**
 * `fetch` with the session's token, when there is one; a 401 to a request that carried it ends the
 * session. Every call the console and plugins' admin pages make goes through it.
 */
export async function sessionFetch(input: URL | string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const token = transport.token();
  if (token !== null) headers.set("authorization", `Bearer ${token}`);
  const response = await fetch(input, { ...init, headers });
  if (response.status === 401 && token !== null) {
    transport.expired("Your session has ended (expired or revoked): sign in again.");
  }
  return response;
}

type Params = Record<string, string>;

function pathOf(template: string, params: Params = {}): string {
  return template.replace(/:([A-Za-z]+)/g, (_m, name: string) => encodeURIComponent(params[name] ?? ""));
}

export async function call<K extends RouteName>(
  name: K,
  input: {
    params?: Params;
    query?: Query<K>;
    /** JSON, an uploaded archive (a Blob, with `contentType`) or a multipart form (a media upload). */
    body?: Body<K> | Blob | FormData;
    contentType?: string;
  } = {},
): Promise<Reply<K>> {
  const [method, template] = ROUTES[name];
  const url = new URL(pathOf(template, input.params), location.origin);
  for (const [k, v] of Object.entries((input.query ?? {}) as Record<string, unknown>)) {
    if (typeof v === "string" || typeof v === "number" || typeof v === "boolean") {
      if (v !== "") url.searchParams.set(k, String(v));
    }
  }
  const headers: Record<string, string> = { accept: "application/json" };
  let body: BodyInit | undefined;
  if (input.body instanceof FormData) {
    // The browser writes the multipart boundary into the content type.
    body = input.body;
  } else if (input.body instanceof Blob) {
    body = input.body;
    headers["content-type"] = input.contentType ?? "application/octet-stream";
  } else if (input.body !== undefined) {
    body = JSON.stringify(input.body);
    headers["content-type"] = "application/json";
  }
  return send<Reply<K>>(method, url, headers, body);
}

async function send<T>(
  method: string,
  url: URL,
  headers: Record<string, string>,
  body?: BodyInit,
): Promise<T> {
  let response: Response;
  try {
    response = await sessionFetch(url, { method, headers, ...(body === undefined ? {} : { body }) });
  } catch {
    throw new ApiError(0, { detail: "The platform could not be reached." }, null);
  }
  const text = await response.text();
  const parsed = text.length > 0 ? safeJson(text) : undefined;
  if (!response.ok) {
    const retry = Number(response.headers.get("retry-after"));
    throw new ApiError(
      response.status,
      (parsed as ApiError["problem"] | undefined) ?? { detail: response.statusText },
      Number.isFinite(retry) && retry > 0 ? retry : null,
    );
  }
  return parsed as T;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { detail: text.slice(0, 200) };
  }
}

/** POST /api/auth/login (not an operator route: it takes no session). */
export async function signIn(body: {
  username: string;
  password: string;
  workspaceKey?: string;
}): Promise<{ accessToken: string; expiresIn: number }> {
  return send(
    "POST",
    new URL("/api/auth/login", location.origin),
    { "content-type": "application/json" },
    JSON.stringify(body),
  );
}

/** POST /api/auth/logout: the session is revoked on the platform, not only forgotten here. */
export async function signOut(): Promise<void> {
  if (transport.token() === null) return;
  await sessionFetch(new URL("/api/auth/logout", location.origin), { method: "POST" }).catch(() => undefined);
}
