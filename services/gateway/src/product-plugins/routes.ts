/**
 * Plugin routes: `/api/plugins/{pluginId}/{path}` is dispatched to the active
 * plugin's subject (`<prefix>.plugins.<pluginId>.http`) with the same guard as every core route: the
 * superadmin short-circuit, `*`, the route's key (none: any authenticated caller), the scope rules. An
 * unknown or inactive plugin, or a path it does not declare, is a 404. The table of active plugins and
 * their routes follows the registry's lifecycle broadcast (within a second) and a 30 s resync.
 */
import { authorise } from "@svc/access";
import type { Bus, Principal, RouteReply } from "@svc/bus";
import { followContributions, type PluginContribution, quietUnlessUp } from "@svc/contracts";
import { ErrorCode, NotFoundError, SvcError } from "@svc/errors";
import type { Logger } from "@svc/observability";
import type { PluginHttpReply, PluginHttpRequest } from "@svc/wire-contract";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";

interface CompiledRoute {
  readonly method: string;
  readonly segments: readonly string[];
  readonly permission: string;
  readonly handler: string;
  readonly path: string;
}

/** Matches `/a/:b/c` against a request path's segments; the parameters, or undefined. */
export function matchPath(
  segments: readonly string[],
  parts: readonly string[],
): Record<string, string> | undefined {
  if (segments.length !== parts.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i] as string;
    const p = parts[i] as string;
    if (s.startsWith(":")) {
      if (p === "") return undefined;
      params[s.slice(1)] = p;
    } else if (s !== p) return undefined;
  }
  return params;
}

/**
 * A plugin's answer, checked: any NATS client holding the plugin's credentials may answer, so a status
 * outside 200–599 or a header that is not text is the plugin's failure (502), not the gateway's (500).
 */
export function pluginReply(pluginId: string, answer: unknown): PluginHttpReply {
  const a = answer as { status?: unknown; headers?: unknown } | null;
  const statusOk =
    typeof a?.status === "number" && Number.isInteger(a.status) && a.status >= 200 && a.status <= 599;
  const headers = a?.headers;
  const headersOk =
    headers === undefined ||
    (typeof headers === "object" &&
      headers !== null &&
      !Array.isArray(headers) &&
      Object.values(headers).every((v) => typeof v === "string"));
  if (!statusOk || !headersOk) {
    throw new SvcError(
      ErrorCode.PluginFailed,
      `Plugin '${pluginId}' gave an answer that is not a valid reply.`,
      {
        extensions: { pluginId },
      },
    );
  }
  return answer as PluginHttpReply;
}

const split = (path: string) => path.split("/").filter((s, i) => i > 0 || s !== "");

interface ActivePlugin {
  readonly routes: readonly CompiledRoute[];
  /** The workspaces whose chain holds it while it is entitled there. */
  readonly workspaces: ReadonlySet<string>;
}

export class PluginRouteTable {
  private table = new Map<string, ActivePlugin>();

  apply(plugins: readonly PluginContribution[]): void {
    const next = new Map<string, ActivePlugin>();
    for (const p of plugins) {
      if (p.state !== "active") continue;
      next.set(p.pluginId, {
        routes: p.routes.map((r) => ({ ...r, segments: split(r.path) })),
        workspaces: new Set(p.workspaces),
      });
    }
    this.table = next;
  }

  /**
   * The route and its parameters, or a 404/405 problem. `workspaceKey`: the caller's, for a workspace
   * session, which reaches a plugin's routes only where the plugin is in its workspace's chain and
   * entitled there; elsewhere the plugin does not exist for it (the same 404).
   */
  find(pluginId: string, method: string, path: string, workspaceKey: string | null = null) {
    const plugin = this.table.get(pluginId);
    if (plugin === undefined || (workspaceKey !== null && !plugin.workspaces.has(workspaceKey))) {
      throw new NotFoundError(`No active plugin '${pluginId}'.`);
    }
    const routes = plugin.routes;
    const parts = split(path === "" ? "/" : path);
    const allowed: string[] = [];
    for (const route of routes) {
      const params = matchPath(route.segments, parts);
      if (params === undefined) continue;
      if (route.method === method) return { route, params };
      allowed.push(route.method);
    }
    if (allowed.length > 0) {
      throw new SvcError(ErrorCode.MethodNotAllowed, `${method} is not allowed here.`, {
        extensions: { allow: allowed },
      });
    }
    throw new NotFoundError(`Plugin '${pluginId}' has no route ${method} ${path}.`);
  }
}

const FORWARDED_HEADERS = ["content-type", "accept", "accept-language", "user-agent"] as const;

export async function registerPluginRoutes(
  app: FastifyInstance,
  options: {
    readonly bus: Bus;
    readonly log: Logger;
    /** Rate limit and authentication: the caller, or a 401/429. */
    readonly identify: (request: FastifyRequest, reply: FastifyReply) => Promise<Principal>;
    readonly send: (reply: FastifyReply, result: RouteReply) => FastifyReply;
    /** The request deadline of a plugin route (BackendHost__PluginCallTimeoutMs). */
    readonly timeoutMs: number;
  },
): Promise<void> {
  const table = new PluginRouteTable();
  const follower = followContributions(
    options.bus,
    async (plugins) => table.apply(plugins),
    quietUnlessUp(options.log),
    30_000,
  );
  app.addHook("onClose", async () => follower.stop());

  app.route<{ Params: { id: string; "*": string } }>({
    method: ["GET", "POST", "PUT", "PATCH", "DELETE"],
    url: "/api/plugins/:id/*",
    handler: async (request, reply) => {
      void reply.header("cache-control", "no-store");
      const principal = await options.identify(request, reply);
      const pluginId = request.params.id;
      const path = `/${request.params["*"]}`;
      const { route, params } = table.find(
        pluginId,
        request.method,
        path,
        principal.scope === "workspace" ? (principal.workspaceKey ?? "") : null,
      );
      const query = request.query as Record<string, unknown>;
      authorise(principal, { permission: route.permission }, params, query);
      const headers: Record<string, string> = {};
      for (const name of FORWARDED_HEADERS) {
        const value = request.headers[name];
        if (typeof value === "string") headers[name] = value;
      }
      const message: PluginHttpRequest = {
        route: { method: route.method, path: route.path, handler: route.handler },
        method: request.method,
        path,
        params,
        query,
        headers,
        body: request.body ?? null,
        principal,
      };
      // The subject without the deployment prefix (the bus adds it): pluginHttpSubject's shape.
      const answer = await options.bus.request(`plugins.${pluginId}.http`, message, {
        requestId: request.id,
        timeoutMs: options.timeoutMs,
      });
      return options.send(reply, pluginReply(pluginId, answer));
    },
  });
}
