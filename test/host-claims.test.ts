/**
 * A host belongs to one tenant. The attack: a workspace admin of one tenant, holding only
 * `workspace.update`, bound another tenant's host under a new prefix (`b.example` + `/login`) and served
 * its page there, and the 409 for an exact clash named the other workspace. Now hosts are assigned to
 * tenants (by the platform, or when a platform session first binds them), a workspace binds only its
 * tenant's hosts, and a refusal names nothing the caller cannot see.
 */
import { gatewayService } from "@svc/service-gateway";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi, http } from "./support/http.js";
import { mintToken } from "./support/tokens.js";

const h = await createHarness();
let base: string;
let operator: string;

const api = bearerApi(() => base);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);

afterAll(() => h.stopAll());
beforeAll(async () => {
  const env = { BackendHost__RateLimitApiPerMinute: "0" };
  await h.start(rbacService, env);
  await h.start(resolverService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
  for (const tenantKey of ["victim", "attacker"]) {
    expect((await asOperator("POST", "/api/tenants", { tenantKey, name: tenantKey })).status).toBe(201);
  }
  // The victim's site, bound by a platform operator: the host becomes the victim tenant's.
  const site = await asOperator("PUT", "/api/workspaces/victim-site", {
    tenantKey: "victim",
    name: "Victim",
    bindings: [{ host: "b.example", pathPrefix: "/" }],
  });
  expect(site.status, site.text).toBe(201);
  expect(
    (await asOperator("PUT", "/api/workspaces/attacker-site", { tenantKey: "attacker", name: "Attacker" }))
      .status,
  ).toBe(201);
});

describe("hosts belong to one tenant", () => {
  it("a workspace admin cannot bind another tenant's host, under any prefix, and learns nothing of it", async () => {
    const admin = await mintToken({
      scope: "workspace",
      workspaceKey: "attacker-site",
      permissions: ["workspace.update", "workspace.read"],
    });
    for (const pathPrefix of ["/login", "/"]) {
      const taken = await api("PUT", "/api/workspaces/attacker-site", admin, {
        tenantKey: "attacker",
        name: "Attacker",
        bindings: [{ host: "b.example", pathPrefix }],
      });
      expect(taken.status, pathPrefix).toBe(409);
      expect(taken.text).not.toContain("victim");
    }
    // The victim's page still resolves to the victim.
    const resolved = await http(`${base}/workspace/public/resolve`, {
      headers: { host: "b.example", "x-forwarded-uri": "/login" },
    });
    expect(resolved.json()).toEqual({ resolved: true, workspaceKey: "victim-site" });
  });

  it("a workspace admin binds only hosts its tenant has; the platform assigns them", async () => {
    const admin = await mintToken({
      scope: "workspace",
      workspaceKey: "attacker-site",
      permissions: ["workspace.update"],
    });
    const body = {
      tenantKey: "attacker",
      name: "Attacker",
      bindings: [{ host: "a.example", pathPrefix: "/shop" }],
    };
    const unassigned = await api("PUT", "/api/workspaces/attacker-site", admin, body);
    expect(unassigned.status).toBe(409);
    expect(unassigned.text).toContain("a platform operator with tenant.update assigns hosts");
    expect((await asOperator("PUT", "/api/tenants/attacker/hosts/a.example")).status).toBe(201);
    expect((await asOperator("PUT", "/api/tenants/attacker/hosts/A.Example")).status).toBe(200);
    expect((await api("PUT", "/api/workspaces/attacker-site", admin, body)).status).toBe(200);
    expect((await asOperator("GET", "/api/tenants/attacker/hosts")).json()).toMatchObject({
      tenantKey: "attacker",
      items: [{ host: "a.example", tenantKey: "attacker" }],
    });
    // One tenant's host cannot be given to another; nor taken back while bound.
    expect((await asOperator("PUT", "/api/tenants/victim/hosts/a.example")).status).toBe(409);
    expect((await asOperator("DELETE", "/api/tenants/attacker/hosts/a.example")).status).toBe(409);
    // The host routes are the platform's.
    expect((await api("GET", "/api/tenants/attacker/hosts", admin)).status).toBe(403);
    await api("PUT", "/api/workspaces/attacker-site", admin, { ...body, bindings: [] });
    expect((await asOperator("DELETE", "/api/tenants/attacker/hosts/a.example")).status).toBe(204);
  });

  it("a platform session with workspace.update but not tenant.update binds no host its tenant lacks", async () => {
    const editor = await mintToken({
      scope: "platform",
      permissions: ["workspace.update", "workspace.read"],
    });
    const free = await api("PUT", "/api/workspaces/attacker-site", editor, {
      tenantKey: "attacker",
      name: "Attacker",
      bindings: [{ host: "free.example" }],
    });
    expect(free.status, free.text).toBe(409);
    const hosts = (await asOperator("GET", "/api/tenants/attacker/hosts")).json<{
      items: Array<{ host: string }>;
    }>();
    expect(hosts.items.map((h) => h.host)).not.toContain("free.example");
  });

  it("a binding for a tenant that does not exist is a 400 naming the tenant, and assigns no host", async () => {
    // Found by make fuzz: the host was assigned before the tenant was checked, and the foreign key made a 500.
    const missing = await asOperator("PUT", "/api/workspaces/ghost-site", {
      tenantKey: "no-such-tenant",
      name: "Ghost",
      bindings: [{ host: "ghost.example" }],
    });
    expect(missing.status, missing.text).toBe(400);
    expect(missing.json()).toMatchObject({ errors: [{ field: "/body/tenantKey" }] });
    expect((await asOperator("PUT", "/api/tenants/attacker/hosts/ghost.example")).status).toBe(201);
    expect((await asOperator("DELETE", "/api/tenants/attacker/hosts/ghost.example")).status).toBe(204);
  });

  it("a platform session binding a new host assigns it to the workspace's tenant", async () => {
    const bound = await asOperator("PUT", "/api/workspaces/attacker-site", {
      tenantKey: "attacker",
      name: "Attacker",
      bindings: [{ host: "c.example" }],
    });
    expect(bound.status, bound.text).toBe(200);
    expect((await asOperator("GET", "/api/tenants/attacker/hosts")).json()).toMatchObject({
      items: [{ host: "c.example" }],
    });
    // Even a platform session cannot bind another tenant's host to this tenant's workspace.
    const refused = await asOperator("PUT", "/api/workspaces/attacker-site", {
      tenantKey: "attacker",
      name: "Attacker",
      bindings: [{ host: "b.example", pathPrefix: "/other" }],
    });
    expect(refused.status).toBe(409);
  });
});

describe("paths another workspace of the same tenant serves", () => {
  it("a workspace admin cannot bind a prefix under a sibling's binding on their tenant's host; the platform can", async () => {
    // A second workspace of the victim tenant, whose admin would take the site's /login.
    expect(
      (await asOperator("PUT", "/api/workspaces/victim-blog", { tenantKey: "victim", name: "Blog" })).status,
    ).toBe(201);
    const blogAdmin = await mintToken({
      scope: "workspace",
      workspaceKey: "victim-blog",
      permissions: ["workspace.update"],
    });
    const bind = (token: string, pathPrefix: string) =>
      api("PUT", "/api/workspaces/victim-blog", token, {
        tenantKey: "victim",
        name: "Blog",
        bindings: [{ host: "b.example", pathPrefix }],
      });
    const refused = await bind(blogAdmin, "/login");
    expect(refused.status, refused.text).toBe(409);
    expect(refused.json()).toMatchObject({ rule: "binding-under-another-workspace" });
    expect(refused.text).not.toContain("victim-site");
    const resolved = await http(`${base}/workspace/public/resolve`, {
      headers: { host: "b.example", "x-forwarded-uri": "/login" },
    });
    expect(resolved.json()).toEqual({ resolved: true, workspaceKey: "victim-site" });
    // A platform operator splits the host deliberately; the blog's admin then keeps its binding.
    expect((await bind(operator, "/blog")).status).toBe(200);
    expect((await bind(blogAdmin, "/blog")).status).toBe(200);
  });
});
