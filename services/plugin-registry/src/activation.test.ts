/**
 * Activation and deactivation through their contracts, with the lifecycle tables and the plugin runtime in
 * memory: no NATS, no PostgreSQL, no plugin process. A plugin becomes `active` only once the runtime has
 * loaded it and every capability it requires is provided; a provider is not stopped while an active plugin
 * needs what only it provides; a refused package is never activated; the runtime's report of a stopped
 * plugin marks only the package that failed.
 */
import type { Principal } from "@svc/bus";
import { caller, callRoute, pluginRegistryRoutes, refusalOf } from "@svc/contracts";
import { ErrorCode, SvcError } from "@svc/errors";
import { Registry } from "@svc/observability";
import { beforeEach, describe, expect, it } from "vitest";

import {
  activate,
  type ActivationDeps,
  deactivate,
  type LifecycleTables,
  type PluginMove,
  recordFailure,
} from "./activation.js";
import { lifecycleMetrics, type PluginRow } from "./common.js";

function plugin(
  id: string,
  more: { state?: PluginRow["state"]; provides?: string[]; requires?: string[]; refused?: string } = {},
): PluginRow {
  return {
    plugin_id: id,
    name: id,
    version: "1.0.0",
    tier: "application",
    contract_version: "1.0",
    package_sha256: `${id}`.padEnd(64, "0"),
    signed: true,
    signer_fingerprint: null,
    publisher_id: null,
    registry: {
      contractVersion: "1.0",
      schemaVersion: "1",
      name: id,
      pluginId: id,
      version: "1.0.0",
      assemblyFileName: "index.mjs",
      entryTypeName: "default",
      capabilities: more.provides ?? [],
      requiresCapabilities: more.requires ?? [],
    },
    theme: null,
    state: more.state ?? "inactive",
    failure_reason: null,
    refused_reason: more.refused ?? null,
    installed_at: new Date(0),
    updated_at: new Date(0),
  };
}

class MemoryLifecycle implements LifecycleTables {
  readonly rows = new Map<string, PluginRow>();
  readonly audits: string[] = [];

  add(row: PluginRow) {
    this.rows.set(row.plugin_id, row);
  }

  async move<T>(pluginId: string, change: (move: PluginMove) => Promise<T>): Promise<T> {
    const others = () =>
      [...this.rows.values()].filter((r) => r.state === "active" && r.plugin_id !== pluginId);
    const before = new Map(this.rows);
    try {
      return await change({
        found: this.rows.get(pluginId) ?? null,
        providedByOthers: async () => new Set(others().flatMap((r) => r.registry.capabilities ?? [])),
        dependents: async (capabilities) =>
          others()
            .flatMap((r) =>
              (r.registry.requiresCapabilities ?? [])
                .filter((c) => capabilities.includes(c))
                .map((capability) => ({ pluginId: r.plugin_id, capability })),
            )
            .sort((a, b) => a.pluginId.localeCompare(b.pluginId)),
        setState: async (state) => {
          const row = { ...this.rows.get(pluginId)!, state, failure_reason: null };
          this.rows.set(pluginId, row);
          return row;
        },
      });
    } catch (error) {
      // A transaction: a refused move leaves the tables as they were.
      this.rows.clear();
      for (const [k, v] of before) this.rows.set(k, v);
      throw error;
    }
  }

  async markFailed(pluginId: string, sha256: string, reason: string) {
    const row = this.rows.get(pluginId);
    if (row === undefined || row.package_sha256 !== sha256 || row.state !== "active") return null;
    const failed = { ...row, state: "failed" as const, failure_reason: reason };
    this.rows.set(pluginId, failed);
    return failed;
  }

  async audit(principal: Principal, action: string, p: { id: string }, error?: unknown) {
    const outcome =
      error === undefined
        ? "succeeded"
        : `failed (${error instanceof SvcError ? error.code : typeof error === "string" ? error : "?"})`;
    this.audits.push(`${principal.subject} ${action} ${p.id}: ${outcome}`);
  }
}

/** The runtime's loaded packages, and the plugins whose load fails. */
class MemoryRuntime {
  readonly loaded = new Map<string, string>();
  readonly failing = new Map<string, Error>();

  async load(row: PluginRow) {
    const failure = this.failing.get(row.plugin_id);
    if (failure !== undefined) throw failure;
    this.loaded.set(row.plugin_id, row.package_sha256);
  }
  async unload(id: string) {
    this.loaded.delete(id);
  }
  runningVersion(id: string) {
    return this.loaded.get(id);
  }
}

const operator = caller(["plugin.execute"]);

let lifecycle: MemoryLifecycle;
let runtime: MemoryRuntime;
let announced: string[];
let deps: ActivationDeps;

beforeEach(() => {
  lifecycle = new MemoryLifecycle();
  runtime = new MemoryRuntime();
  announced = [];
  const warnings: unknown[] = [];
  deps = {
    lifecycle,
    runtime,
    metrics: lifecycleMetrics(new Registry()),
    announce: (id) => void announced.push(id),
    log: { warn: (...args: unknown[]) => void warnings.push(args) } as unknown as ActivationDeps["log"],
  };
});

const call = (action: "activate" | "deactivate", id: string) =>
  action === "activate"
    ? callRoute(pluginRegistryRoutes["plugins.activate"], (req) => activate(deps, req), {
        principal: operator,
        params: { id },
        query: {},
        body: null,
      })
    : callRoute(pluginRegistryRoutes["plugins.deactivate"], (req) => deactivate(deps, req), {
        principal: operator,
        params: { id },
        query: {},
        body: null,
      });

describe("activating a plugin", () => {
  it("loads it, then marks it active, audits and announces it", async () => {
    lifecycle.add(plugin("shop"));
    const answer = await call("activate", "shop");
    expect(answer.body).toMatchObject({ pluginId: "shop", state: "active", isActive: true });
    expect(runtime.loaded.has("shop")).toBe(true);
    expect(lifecycle.audits).toEqual(["op activate shop: succeeded"]);
    expect(announced).toEqual(["shop"]);
  });

  it("answers 404 for a plugin not installed, and audits the attempt", async () => {
    expect((await refusalOf(call("activate", "ghost"))).code).toBe(ErrorCode.NotFound);
    expect(lifecycle.audits).toEqual([`op activate ghost: failed (${ErrorCode.NotFound})`]);
    expect(announced).toEqual([]);
  });

  it("keeps a plugin whose load fails inactive, with the runtime's reason", async () => {
    lifecycle.add(plugin("shop"));
    runtime.failing.set(
      "shop",
      Object.assign(new Error("index.mjs threw at load"), { extensions: { reason: "load-failed" } }),
    );
    const error = await refusalOf(call("activate", "shop"));
    expect(error.status).toBe(422);
    expect(error.extensions.reason).toBe("load-failed");
    expect(error.message).toContain("index.mjs threw at load");
    expect(lifecycle.rows.get("shop")?.state).toBe("inactive");
    expect(announced).toEqual([]);
  });

  it("never activates a package refused when it was last loaded", async () => {
    lifecycle.add(plugin("shop", { refused: "signature no longer trusted" }));
    const error = await refusalOf(call("activate", "shop"));
    expect(error.extensions.reason).toBe("refused");
    expect(runtime.loaded.size).toBe(0);
    expect(lifecycle.rows.get("shop")?.state).toBe("inactive");
  });

  it("needs every required capability provided by an active plugin or by itself", async () => {
    lifecycle.add(plugin("mailer", { provides: ["mail"] }));
    lifecycle.add(plugin("shop", { requires: ["mail", "search"], provides: ["search"] }));
    const error = await refusalOf(call("activate", "shop"));
    expect(error.status).toBe(422);
    expect(error.extensions).toMatchObject({ reason: "missing-capability", capability: "mail" });
    expect(runtime.loaded.size).toBe(0);
    await call("activate", "mailer");
    expect((await call("activate", "shop")).body).toMatchObject({ state: "active" });
  });

  it("moves a failed plugin back to active", async () => {
    lifecycle.add(plugin("shop", { state: "failed" }));
    expect((await call("activate", "shop")).body).toMatchObject({ state: "active", failureReason: null });
  });
});

describe("deactivating a plugin", () => {
  it("unloads it and marks it inactive; an inactive plugin stays as it is", async () => {
    lifecycle.add(plugin("shop"));
    await call("activate", "shop");
    expect((await call("deactivate", "shop")).body).toMatchObject({ state: "inactive" });
    expect(runtime.loaded.has("shop")).toBe(false);
    expect((await call("deactivate", "shop")).body).toMatchObject({ state: "inactive" });
  });

  it("refuses (409) to stop the only provider of a capability an active plugin needs, naming the dependents", async () => {
    lifecycle.add(plugin("mailer", { provides: ["mail"] }));
    lifecycle.add(plugin("shop", { requires: ["mail"] }));
    lifecycle.add(plugin("blog", { requires: ["mail"] }));
    for (const id of ["mailer", "shop", "blog"]) await call("activate", id);
    const error = await refusalOf(call("deactivate", "mailer"));
    expect(error.status).toBe(409);
    expect(error.extensions).toMatchObject({ rule: "capability-in-use", dependents: ["blog", "shop"] });
    expect(lifecycle.rows.get("mailer")?.state).toBe("active");
    expect(runtime.loaded.has("mailer")).toBe(true);
    // A second provider makes it free to go.
    lifecycle.add(plugin("postbox", { provides: ["mail"] }));
    await call("activate", "postbox");
    expect((await call("deactivate", "mailer")).body).toMatchObject({ state: "inactive" });
  });
});

describe("the runtime's report of a stopped plugin", () => {
  it("marks the failed package failed with the reason, audits it and announces it", async () => {
    lifecycle.add(plugin("shop"));
    await call("activate", "shop");
    lifecycle.audits.length = 0;
    announced.length = 0;
    await recordFailure(deps, "shop", "shop".padEnd(64, "0"), "the plugin process exited (code 1)");
    expect(lifecycle.rows.get("shop")).toMatchObject({
      state: "failed",
      failure_reason: "the plugin process exited (code 1)",
    });
    expect(lifecycle.audits).toEqual([
      "svc:plugin-runtime fail shop: failed (the plugin process exited (code 1))",
    ]);
    expect(announced).toEqual(["shop"]);
  });

  it("leaves alone a plugin updated meanwhile, or no longer active", async () => {
    lifecycle.add(plugin("shop"));
    await call("activate", "shop");
    announced.length = 0;
    await recordFailure(deps, "shop", "f".repeat(64), "crashed");
    expect(lifecycle.rows.get("shop")?.state).toBe("active");
    await call("deactivate", "shop");
    announced.length = 0;
    await recordFailure(deps, "shop", "shop".padEnd(64, "0"), "crashed");
    expect(lifecycle.rows.get("shop")?.state).toBe("inactive");
    expect(announced).toEqual([]);
  });
});
