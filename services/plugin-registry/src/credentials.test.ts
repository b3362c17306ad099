/**
 * An external plugin backend's NATS credentials through their contracts, with the tables and the minter in
 * memory: no NATS, no PostgreSQL. Issued only with minting configured, only for an installed external
 * plugin; the creds shown once with the subjects they allow, the seed never stored; a revocation is kept
 * from the first time; every outcome audited.
 */
import type { Principal } from "@svc/bus";
import { caller, callRoute, pluginRegistryRoutes } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import type { RegistryJson } from "@svc/plugin-package";
import { beforeEach, describe, expect, it } from "vitest";

import {
  type CredentialRow,
  type CredentialTables,
  DEFAULT_TTL_SECONDS,
  issue,
  list,
  revoke,
} from "./credentials.js";

const registryOf = (runtime: "external" | undefined, events: string[]) =>
  ({ runtime, events }) as unknown as RegistryJson;

class MemoryCredentials implements CredentialTables {
  readonly plugins = new Map<string, { version: string; registry: RegistryJson }>([
    ["crm", { version: "1.2.0", registry: registryOf("external", ["crm.synced"]) }],
    ["hello", { version: "1.0.0", registry: registryOf(undefined, []) }],
  ]);
  readonly rows: CredentialRow[] = [];
  readonly audits: string[] = [];
  /** Uninstalls the plugin while a credential is being issued (the race `record` guards). */
  uninstallOnRecord = false;

  async plugin(pluginId: string) {
    return this.plugins.get(pluginId) ?? null;
  }

  async record(e: Parameters<CredentialTables["record"]>[0]) {
    if (this.uninstallOnRecord) this.plugins.delete(e.pluginId);
    if (!this.plugins.has(e.pluginId)) return null;
    const row: CredentialRow = {
      credential_id: e.credentialId,
      plugin_id: e.pluginId,
      name: e.name,
      public_key: e.publicKey,
      created_by: e.createdBy,
      created_at: new Date(Date.now() + this.rows.length),
      expires_at: e.expiresAt,
      revoked_at: null,
    };
    this.rows.push(row);
    return row;
  }

  async list(pluginId: string) {
    return this.rows
      .filter((r) => r.plugin_id === pluginId)
      .sort((a, b) => b.created_at.getTime() - a.created_at.getTime());
  }

  async revoke(pluginId: string, credentialId: string) {
    const row = this.rows.find((r) => r.plugin_id === pluginId && r.credential_id === credentialId);
    if (row === undefined) return null;
    row.revoked_at ??= new Date();
    return row;
  }

  async audit(principal: Principal, action: string, plugin: { id: string }, error?: unknown) {
    this.audits.push(`${action} ${plugin.id}: ${error === undefined ? "succeeded" : "failed"}`);
  }
}

const operator = caller(["plugin.read", "plugin.execute"]);

let tables: MemoryCredentials;
let minted: Array<{ pluginId: string; events: readonly string[]; ttl: number | undefined }>;
let minting: boolean;
const deps = () => ({
  prefix: "svc",
  tables,
  credentials: {
    get minting() {
      return minting;
    },
    mint: async (pluginId: string, events: readonly string[], ttl?: number) => {
      minted.push({ pluginId, events, ttl });
      const expiresAt = Date.now() + (ttl ?? 0) * 1_000;
      return {
        creds: "-----BEGIN NATS USER JWT-----",
        publicKey: "UABC",
        expiresAt,
        jwt: "j",
        privateKeyPem: "k",
      };
    },
  },
});

beforeEach(() => {
  tables = new MemoryCredentials();
  minted = [];
  minting = true;
});

const issueFor = (id: string, body: object = {}, principal = operator) =>
  callRoute(pluginRegistryRoutes["plugins.credentials.issue"], (req) => issue(deps(), req), {
    principal,
    params: { id },
    query: {},
    body,
  });

describe("POST /api/plugins/:id/credentials", () => {
  it("issues a week's credentials for an external plugin: the creds once, the subjects they allow", async () => {
    const answer = await issueFor("crm", { name: "backend" });
    expect(answer.status).toBe(201);
    expect(answer.body).toMatchObject({
      pluginId: "crm",
      name: "backend",
      publicKey: "UABC",
      createdBy: "op",
      revokedAtUtc: null,
      creds: "-----BEGIN NATS USER JWT-----",
      subjects: {
        serve: "svc.plugins.crm.http",
        queue: "plugin.crm",
        publish: ["svc.events.crm.synced"],
      },
    });
    expect(minted).toEqual([{ pluginId: "crm", events: ["crm.synced"], ttl: DEFAULT_TTL_SECONDS }]);
    // What is kept is the public key: no creds, no seed.
    expect(JSON.stringify(tables.rows)).not.toContain("BEGIN NATS USER JWT");
    expect(tables.audits).toEqual([
      `credentials issue ${(answer.body as { credentialId: string }).credentialId} crm: succeeded`,
    ]);
  });

  it("passes a lifetime asked for to the minter", async () => {
    await issueFor("crm", { ttlSeconds: 3_600 });
    expect(minted[0]?.ttl).toBe(3_600);
  });

  it("refuses without minting configured, for a plugin of the platform's runtime (409), for none (404)", async () => {
    minting = false;
    await expect(issueFor("crm")).rejects.toMatchObject({ code: ErrorCode.Conflict });
    minting = true;
    await expect(issueFor("hello")).rejects.toMatchObject({ code: ErrorCode.Conflict });
    await expect(issueFor("ghost")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(minted).toEqual([]);
    expect(tables.rows).toEqual([]);
    expect(tables.audits).toEqual([
      "credentials issue crm: failed",
      "credentials issue hello: failed",
      "credentials issue ghost: failed",
    ]);
  });

  it("stores nothing when the plugin was uninstalled while its credential was minted (404)", async () => {
    tables.uninstallOnRecord = true;
    await expect(issueFor("crm")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(tables.rows).toEqual([]);
  });

  it("is refused to a workspace session by the contract", async () => {
    const session: Principal = { ...operator, scope: "workspace", workspaceKey: "shop" };
    await expect(issueFor("crm", {}, session)).rejects.toMatchObject({ code: ErrorCode.Forbidden });
    expect(minted).toEqual([]);
  });
});

describe("listing and revoking", () => {
  const listFor = (id: string) =>
    callRoute(pluginRegistryRoutes["plugins.credentials.list"], (req) => list(deps(), req), {
      principal: operator,
      params: { id },
      query: {},
      body: null,
    });
  const revokeFor = (id: string, credentialId: string) =>
    callRoute(pluginRegistryRoutes["plugins.credentials.revoke"], (req) => revoke(deps(), req), {
      principal: operator,
      params: { id, credentialId },
      query: {},
      body: null,
    });

  it("lists newest first, an installed plugin's none as empty, and 404 for a plugin not installed", async () => {
    const first = (await issueFor("crm", { name: "one" })).body as { credentialId: string };
    await issueFor("crm", { name: "two" });
    expect(((await listFor("crm")).body as Array<{ name: string }>).map((c) => c.name)).toEqual([
      "two",
      "one",
    ]);
    expect((await listFor("hello")).body).toEqual([]);
    await expect(listFor("ghost")).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(first.credentialId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("revokes once (a second revocation keeps the first time), audits it, and 404s an unknown one", async () => {
    const { credentialId } = (await issueFor("crm")).body as { credentialId: string };
    expect((await revokeFor("crm", credentialId)).status).toBe(204);
    const revokedAt = tables.rows[0]?.revoked_at;
    expect(revokedAt).toBeInstanceOf(Date);
    await revokeFor("crm", credentialId);
    expect(tables.rows[0]?.revoked_at).toBe(revokedAt);
    expect(((await listFor("crm")).body as Array<{ revokedAtUtc: string }>)[0]?.revokedAtUtc).toBe(
      revokedAt?.toISOString(),
    );
    await expect(revokeFor("crm", "00000000-0000-4000-8000-000000000000")).rejects.toMatchObject({
      code: ErrorCode.NotFound,
    });
    expect(tables.audits.filter((a) => a.startsWith("credentials revoke"))).toHaveLength(2);
  });
});
