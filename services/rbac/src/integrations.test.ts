/**
 * The integration routes through their contracts, with their table in memory (no NATS, no PostgreSQL):
 * managing integrations is a platform session's (the contract refuses a workspace session before the
 * handler), the secret is shown once and kept as its digest, no unknown key and no `*` is granted, and a
 * workspace session reads its workspace's integrations only.
 */
import { createHash } from "node:crypto";

import type { Principal } from "@svc/bus";
import { caller } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { describe, expect, it } from "vitest";

import * as integrations from "./integrations.js";
import { routeCaller } from "./route-caller.js";

class MemoryIntegrations implements integrations.IntegrationTables {
  readonly rows: Array<integrations.IntegrationRow & { secretDigest: string }> = [];
  private clock = 0;

  private reaches(principal: Principal, workspaceKey: string | null) {
    return principal.scope === "platform" || workspaceKey === principal.workspaceKey;
  }
  async list(principal: Principal) {
    return this.rows.filter((r) => this.reaches(principal, r.workspaceKey));
  }
  async knownKeys() {
    return new Set(["user.read", "webhook.manage"]);
  }
  async insert(row: Omit<integrations.IntegrationRow, "createdAt"> & { secretDigest: string }) {
    this.rows.push({ ...row, createdAt: new Date((this.clock += 1_000)) });
  }
  async remove(principal: Principal, id: string) {
    const i = this.rows.findIndex((r) => r.id === id && this.reaches(principal, r.workspaceKey));
    if (i < 0) return false;
    this.rows.splice(i, 1);
    return true;
  }
}

// An integration gets only keys its creator holds: user.read is given below.
const operator = caller(["integration.read", "integration.manage", "user.read"]);
const session = (workspaceKey: string): Principal => ({
  subject: `admin-${workspaceKey}`,
  scope: "workspace",
  workspaceKey,
  permissions: ["integration.read"],
  roles: ["admin"],
});

function stack() {
  const tables = new MemoryIntegrations();
  const deps = { integrations: tables };
  const call = routeCaller(deps);
  return { tables, call };
}

describe("the integration routes", () => {
  it("shows the secret once and keeps only its digest; a workspace session reads its workspace's only", async () => {
    const { tables, call } = stack();
    const made = await call("integrations.create", integrations.createIntegration, operator, {
      body: { name: "CRM", workspaceKey: "alpha", permissions: ["user.read"] },
    });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ workspaceKey: "alpha", permissions: ["user.read"] });
    const secret = made.body?.clientSecret as string;
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(tables.rows[0]?.secretDigest).toBe(createHash("sha256").update(secret).digest("hex"));
    await call("integrations.create", integrations.createIntegration, operator, {
      body: { name: "everywhere" },
    });
    // Listed without the secret; a workspace session sees its workspace's.
    const all = await call("integrations.list", integrations.listIntegrations, operator, {});
    expect(JSON.stringify(all.body)).not.toContain(secret);
    expect((all.body as unknown as unknown[]).length).toBe(2);
    const alpha = await call("integrations.list", integrations.listIntegrations, session("alpha"), {});
    expect((alpha.body as unknown as Array<{ name: string }>).map((i) => i.name)).toEqual(["CRM"]);
    expect(await call("integrations.list", integrations.listIntegrations, session("beta"), {})).toMatchObject(
      {
        body: [],
      },
    );
    // Managing is a platform session's: the contract refuses a workspace session before the handler.
    await expect(
      call(
        "integrations.create",
        integrations.createIntegration,
        { ...session("alpha"), permissions: ["integration.manage"] },
        {
          body: { name: "x" },
        },
      ),
    ).rejects.toMatchObject({ code: ErrorCode.Forbidden });
  });

  it("gives an integration no key its creator lacks; a superadmin gives any", async () => {
    const { tables, call } = stack();
    const manager = { ...operator, permissions: ["integration.manage"] };
    await expect(
      call("integrations.create", integrations.createIntegration, manager, {
        body: { name: "wider", permissions: ["user.read"] },
      }),
    ).rejects.toMatchObject({ code: ErrorCode.Forbidden, extensions: { rule: "grant-exceeds-own-rights" } });
    expect(tables.rows).toEqual([]);
    const root = { ...operator, permissions: [], roles: ["superadmin"] };
    const made = await call("integrations.create", integrations.createIntegration, root, {
      body: { name: "any", permissions: ["user.read"] },
    });
    expect(made.status).toBe(201);
  });

  it("grants no unknown key and no *, listing each, and deletes only what exists", async () => {
    const { tables, call } = stack();
    const refused = call("integrations.create", integrations.createIntegration, operator, {
      body: { name: "x", permissions: ["user.read", "no.such.key", "*"] },
    });
    await expect(refused).rejects.toMatchObject({ code: ErrorCode.ValidationFailed });
    await refused.catch((error: { extensions?: { errors?: Array<{ message: string }> } }) =>
      expect(error.extensions?.errors?.map((e) => e.message)).toEqual([
        "unknown or disallowed key 'no.such.key'",
        "unknown or disallowed key '*'",
      ]),
    );
    expect(tables.rows).toEqual([]);
    const id = (
      await call("integrations.create", integrations.createIntegration, operator, { body: { name: "b" } })
    ).body?.id as string;
    expect(
      (await call("integrations.delete", integrations.deleteIntegration, operator, { params: { id } }))
        .status,
    ).toBe(204);
    await expect(
      call("integrations.delete", integrations.deleteIntegration, operator, { params: { id } }),
    ).rejects.toMatchObject({ code: ErrorCode.NotFound });
  });
});
