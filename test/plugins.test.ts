/**
 * Plugin packages installed through the gateway, on real NATS (the package object store) and
 * PostgreSQL. The good package installs from .tgz and .zip (DER and P1363 signatures); each hostile
 * fixture of the corpus is refused with its reason in the problem document; a signer revoked after
 * install shows in the signature report.
 */
import { execFile, execFileSync } from "node:child_process";
import { createPublicKey } from "node:crypto";
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";

import {
  hashDirectory,
  pluginSchemas,
  signManifest,
  validateRegistry,
  verifyPackage,
} from "@svc/plugin-package";
import { HOST_VERSION } from "@svc/runtime";
import { gatewayService } from "@svc/service-gateway";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { create as createTar } from "tar";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";

import {
  devSignerEnv,
  EXAMPLE_PLUGIN_DIR,
  examplePackage,
  installExamplePlugin,
} from "../scripts/lib/example-plugin.js";
import { DEMO, repoRoot, seedDemo } from "../scripts/lib/stack.js";
import { buildCorpus, type Corpus, writePlugin } from "./plugins/corpus.js";
import { createHarness } from "./support/harness.js";
import { bearerApi, http, type HttpResponse } from "./support/http.js";
import { mintToken } from "./support/tokens.js";
import { until } from "./support/wait.js";

const h = await createHarness();
/**
 * Installs unpack, hash and verify whole packages: on a loaded 2-core machine several at once outlast the
 * default 5 s request deadline, so this file gives them 20 s (latency figures are the benchmark's).
 */
const BASE_ENV = { BackendHost__RateLimitApiPerMinute: "0", BackendHost__RequestTimeoutMs: "20000" };
const work = mkdtempSync(join(tmpdir(), "svc-plugins-"));
let corpus: Corpus;
let base: string;
let operator: string;
let registry_: Awaited<ReturnType<typeof h.start>>;

afterAll(async () => {
  await h.stopAll();
  rmSync(work, { recursive: true, force: true });
});

function filesOf(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const full = join(d, name);
      if (statSync(full).isDirectory()) walk(full);
      else out.push(relative(dir, full));
    }
  };
  walk(dir);
  return out;
}

/** Signs the package at `dir` with the corpus's trusted key. */
async function signWithTrustedKey(dir: string, pluginId: string, version: string): Promise<void> {
  writeFileSync(
    join(dir, "plugin.signature.json"),
    JSON.stringify(signManifest({ pluginId, version, files: await hashDirectory(dir) }, corpus.trustedKey)),
  );
}

/**
 * Installs the package, activates it, entitles the demo tenant to it and makes it the whole chain of the
 * demo workspace; the chain's path.
 */
async function inDefaultChain(bytes: Buffer, pluginId: string, token: string): Promise<string> {
  const installed = await upload(bytes, "application/gzip", token);
  expect(installed.status, installed.text).toBe(201);
  const activated = await api("POST", `/api/plugins/${pluginId}/activate`, token);
  expect(activated.status, activated.text).toBe(200);
  const entitled = await api("PUT", "/api/entitlements", token, {
    items: [{ tenantKey: DEMO.tenantKey, pluginId, entitled: true }],
  });
  expect(entitled.status, entitled.text).toBe(200);
  const chainPath = `/api/workspaces/${DEMO.workspaceKey}/plugins`;
  const assigned = await api("PUT", chainPath, token, { chain: [pluginId] });
  expect(assigned.status, assigned.text).toBe(200);
  return chainPath;
}

async function tgzOf(dir: string): Promise<Buffer> {
  const file = join(work, `${relative(work, dir).replaceAll("/", "_")}-${Date.now()}.tgz`);
  await createTar({ gzip: true, cwd: dir, file, portable: true }, filesOf(dir));
  return readFileSync(file);
}

const api = bearerApi(() => base);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);

function upload(bytes: Buffer, contentType = "application/gzip", token = operator): Promise<HttpResponse> {
  return api("POST", "/api/plugins/install", token, bytes, { contentType });
}

function expectRefused(response: HttpResponse, reason: string) {
  expect(response.status, response.text).toBe(422);
  expect(response.headers["content-type"]).toMatch(/^application\/problem\+json/);
  const problem = response.json<{ code: string; reason: string; detail: string }>();
  expect(problem.code).toBe("SVC_PLUGIN_REFUSED");
  expect(problem.reason).toBe(reason);
  return problem;
}

function registryEnv(extra: Record<string, string> = {}) {
  return {
    BackendHost__TrustedSigners__0__PublisherId: "acme",
    BackendHost__TrustedSigners__0__DisplayName: "Acme Plugins",
    BackendHost__TrustedSigners__0__PublicKey: readFileSync(corpus.trustedPem, "utf8"),
    ...extra,
  };
}

// A test that fails half-way leaves no plugin behind for the next one.
afterEach(async () => {
  if (base === undefined) return;
  const token = await mintToken({ scope: "platform", permissions: ["plugin.read", "plugin.delete"] });
  const listed = await api("GET", "/api/plugins", token);
  if (listed.status !== 200) return;
  for (const p of listed.json<Array<{ pluginId: string }>>()) {
    await api("DELETE", `/api/plugins/${p.pluginId}`, token);
  }
});

beforeAll(async () => {
  corpus = await buildCorpus(join(work, "corpus"));
  const env = { ...BASE_ENV, BackendHost__MaxPackageUploadBytes: "8388608" };
  await h.start(rbacService, env);
  await h.start(resolverService, env);
  await h.start(webhookDispatcherService, env);
  registry_ = await h.start(pluginRegistryService, { ...env, ...registryEnv() });
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({
    scope: "platform",
    permissions: ["plugin.create", "plugin.read", "plugin.delete"],
  });
}, 120_000);

describe("installing a plugin package", () => {
  it("installs the good package from .tgz, lists it, refuses it twice, uninstalls it; then from .zip", async () => {
    const installed = await upload(readFileSync(corpus.archives.goodTgz));
    expect(installed.status, installed.text).toBe(201);
    expect(installed.json()).toMatchObject({
      pluginId: "hello",
      version: "1.0.0",
      signed: true,
      publisherId: "acme",
      signerFingerprint: corpus.signerFingerprint,
      permissions: ["hello.greeting.read"],
      sensitiveFields: ["greeting"],
      isActive: false,
    });
    const listed = (await asOperator("GET", "/api/plugins")).json<Array<{ pluginId: string }>>();
    expect(listed.map((p) => p.pluginId)).toEqual(["hello"]);
    const again = await upload(readFileSync(corpus.archives.goodTgz));
    expect(again.status).toBe(409);
    expect((await asOperator("DELETE", "/api/plugins/hello")).status).toBe(204);
    expect((await asOperator("DELETE", "/api/plugins/hello")).status).toBe(404);
    const zip = await upload(readFileSync(corpus.archives.goodZip), "application/zip");
    expect(zip.status, zip.text).toBe(201);
    expect((await asOperator("DELETE", "/api/plugins/hello")).status).toBe(204);
  });

  it("installs an archive of the plugin's folder, one top-level folder of any name, made by GNU tar, bsdtar, Python's tarfile and zip -r", async () => {
    // As people archive a folder: `tar czf notes.tgz notes`, `zip -r notes.zip notes`.
    const parent = join(work, "top-folder");
    execFileSync("mkdir", ["-p", parent]);
    execFileSync("cp", ["-r", corpus.dirs.good, join(parent, "notes")]);
    const made: Array<[string, string]> = [
      [join(work, "top-gnu.tgz"), "application/gzip"],
      [join(work, "top-bsd.tgz"), "application/gzip"],
      [join(work, "top-py.tar"), "application/x-tar"],
      [join(work, "top.zip"), "application/zip"],
    ];
    execFileSync("tar", ["czf", made[0]?.[0] as string, "-C", parent, "notes"]);
    execFileSync("bsdtar", ["-czf", made[1]?.[0] as string, "-C", parent, "notes"]);
    execFileSync("python3", [
      "-c",
      "import sys, tarfile\nwith tarfile.open(sys.argv[1], 'w') as t: t.add(sys.argv[2], arcname='notes')",
      made[2]?.[0] as string,
      join(parent, "notes"),
    ]);
    execFileSync("zip", ["-qr", made[3]?.[0] as string, "notes"], { cwd: parent });
    for (const [file, type] of made) {
      const installed = await upload(readFileSync(file), type);
      expect(installed.status, `${file}: ${installed.text}`).toBe(201);
      expect(installed.json(), file).toMatchObject({ pluginId: "hello", signed: true, publisherId: "acme" });
      expect((await asOperator("DELETE", "/api/plugins/hello")).status, file).toBe(204);
    }
  });

  it("ends with one record when two replicas install the same plugin at once", async () => {
    const second = await h.start(pluginRegistryService, { ...BASE_ENV, ...registryEnv() });
    try {
      const bytes = readFileSync(corpus.archives.goodTgz);
      const statuses = (await Promise.all([1, 2, 3].map(() => upload(bytes)))).map((r) => r.status).sort();
      expect(statuses).toEqual([201, 409, 409]);
      expect((await asOperator("GET", "/api/plugins")).json<unknown[]>()).toHaveLength(1);
    } finally {
      // Whatever happened, the next test starts with no plugin installed.
      await asOperator("DELETE", "/api/plugins/hello");
      await second.stop();
    }
  });

  it("accepts a P1363 signature", async () => {
    const response = await upload(await tgzOf(corpus.dirs.p1363));
    expect(response.status, response.text).toBe(201);
    expect((await asOperator("DELETE", "/api/plugins/hello")).status).toBe(204);
  });

  it("refuses every hostile package with its reason", async () => {
    expectRefused(await upload(await tgzOf(corpus.dirs.tampered)), "hash-mismatch");
    expectRefused(await upload(await tgzOf(corpus.dirs.injected)), "file-not-in-manifest");
    expectRefused(await upload(await tgzOf(corpus.dirs.missing)), "file-missing");
    expectRefused(await upload(await tgzOf(corpus.dirs.untrusted)), "untrusted-signer");
    expectRefused(await upload(await tgzOf(corpus.dirs.unsigned)), "unsigned");
    for (const archive of [
      "zipSlip",
      "tarAbsolute",
      "tarSymlink",
      "tarDotDot",
      "zipSymlink",
      "zipBomb",
    ] as const) {
      const type = archive.startsWith("zip") ? "application/zip" : "application/gzip";
      const problem = expectRefused(await upload(readFileSync(corpus.archives[archive]), type), "archive");
      expect(problem.detail.length, archive).toBeGreaterThan(10);
    }
    expectRefused(await upload(Buffer.from("plain text, no archive"), "application/octet-stream"), "archive");
  });

  it("refuses a descriptor that breaks the rules, listing each (host too old, contract, keys)", async () => {
    const dir = join(work, "bad-registry");
    writePlugin(dir, "greeter", "2.0.0");
    const registry = JSON.parse(readFileSync(join(dir, "registry.json"), "utf8")) as Record<string, unknown>;
    writeFileSync(
      join(dir, "registry.json"),
      JSON.stringify({
        ...registry,
        contractVersion: "7.0",
        dependencies: { host: ">=99.0.0" },
        permissions: ["tenant.thing.read", "greeter.thing.fly"],
      }),
    );
    const manifest = signManifest(
      { pluginId: "greeter", version: "2.0.0", files: await hashDirectory(dir) },
      corpus.trustedKey,
    );
    writeFileSync(join(dir, "plugin.signature.json"), JSON.stringify(manifest));
    const problem = expectRefused(await upload(await tgzOf(dir)), "registry-invalid") as unknown as {
      errors: Array<{ field: string }>;
    };
    expect(problem.errors.map((e) => e.field).sort()).toEqual([
      "/registry.json/contractVersion",
      "/registry.json/dependencies/host",
      "/registry.json/permissions/0",
      "/registry.json/permissions/1",
    ]);
  });

  it("refuses an upload over the size limit with 413, and a request without a body with 400", async () => {
    const big = Buffer.alloc(9 * 1024 * 1024, 1);
    const response = await upload(big, "application/octet-stream");
    expect(response.status).toBe(413);
    expect(response.headers["content-type"]).toMatch(/^application\/problem\+json/);
    expect((await upload(Buffer.alloc(0))).status).toBe(400);
    const denied = await upload(
      readFileSync(corpus.archives.goodTgz),
      "application/gzip",
      await mintToken({ scope: "platform", permissions: ["plugin.read"] }),
    );
    expect(denied.status).toBe(403);
  });

  it("installs a package sent as a form (curl -F, a browser's FormData), within the same limit; a 415 names what the route takes", async () => {
    // curl, as a user types it (run asynchronously: the gateway answers from this very process).
    const curl = async (file: string, field = "package") => {
      const { stdout } = await promisify(execFile)("curl", [
        "-s",
        "-w",
        '\n{"status":%{http_code}}',
        "-H",
        `authorization: Bearer ${operator}`,
        "-F",
        `${field}=@${file}`,
        `${base}/api/plugins/install`,
      ]);
      return JSON.parse(stdout.trim().split("\n").pop() as string) as { status: number };
    };
    expect(await curl(corpus.archives.goodTgz)).toEqual({ status: 201 });
    expect((await asOperator("DELETE", "/api/plugins/hello")).status).toBe(204);
    // A browser's form (FormData, the file's type left to the browser), here a .zip.
    const form = new FormData();
    form.append("package", new Blob([readFileSync(corpus.archives.goodZip)]), "hello.zip");
    const viaForm = await asOperator("POST", "/api/plugins/install", form);
    expect(viaForm.status, viaForm.text).toBe(201);
    expect((await asOperator("DELETE", "/api/plugins/hello")).status).toBe(204);
    // Over the limit in a form too: 413.
    const big = join(work, "big.tgz");
    writeFileSync(big, Buffer.alloc(9 * 1024 * 1024, 1));
    expect(await curl(big)).toEqual({ status: 413 });
    // A type the route does not take: the problem lists the ones it does.
    const csv = await upload(Buffer.from("a,b"), "text/csv");
    expect(csv.status).toBe(415);
    expect(csv.json<{ accepted: string[]; detail: string }>()).toMatchObject({
      accepted: expect.arrayContaining(["application/gzip", "application/zip", "multipart/form-data"]),
      detail: expect.stringContaining("multipart/form-data"),
    });
  });

  it("lists the trusted signers, the contract it supports, and the audit of what was done", async () => {
    expect((await asOperator("GET", "/api/plugins/security/trusted-signers")).json()).toEqual([
      {
        publisherId: "acme",
        displayName: "Acme Plugins",
        fingerprint: corpus.signerFingerprint,
        source: "configuration",
        revoked: false,
      },
    ]);
    expect((await asOperator("GET", "/api/plugins/contracts/support")).json()).toMatchObject({
      contractVersion: "1.0",
      hostDependencyKey: "host",
      permissionsProperty: "permissions",
    });
    const audit = (await asOperator("GET", "/api/plugins/audit?limit=100")).json<{
      items: Array<{ action: string; outcome: string; pluginId: string | null; reason: string | null }>;
    }>();
    expect(audit.items.some((a) => a.action === "install" && a.outcome === "succeeded")).toBe(true);
    // A refused install names the plugin its registry.json claimed to be.
    const refusedInstall = audit.items.find(
      (a) => a.action === "install" && a.outcome === "failed" && a.reason?.startsWith("untrusted-signer"),
    );
    expect(refusedInstall?.pluginId).toMatch(/^[a-z][a-z0-9-]+$/);
    expect(audit.items.some((a) => a.action === "uninstall" && a.outcome === "succeeded")).toBe(true);
    // ?pluginId= keeps one plugin's entries.
    const one = (
      await asOperator("GET", `/api/plugins/audit?limit=100&pluginId=${refusedInstall?.pluginId}`)
    ).json<{ items: Array<{ pluginId: string | null }> }>();
    expect(one.items.length).toBeGreaterThan(0);
    expect(one.items.length).toBeLessThan(audit.items.length);
    expect(new Set(one.items.map((a) => a.pluginId))).toEqual(new Set([refusedInstall?.pluginId]));
    const none = await asOperator("GET", "/api/plugins/audit?pluginId=never-installed");
    expect(none.json()).toMatchObject({ items: [] });
    expect((await asOperator("GET", "/api/plugins/audit?pluginId=Not%20an%20id")).status).toBe(400);
  });

  it("reports a plugin whose signer was revoked after install (the next load refuses it)", async () => {
    expect((await upload(readFileSync(corpus.archives.goodTgz))).status).toBe(201);
    const valid = (await asOperator("GET", "/api/plugins/signature-report")).json<{ items: unknown[] }>();
    expect(valid.items).toEqual([
      { pluginId: "hello", version: "1.0.0", status: "valid", code: null, reason: null },
    ]);
    // The operator revokes the signer: the registry restarts with the new setting.
    await registry_.stop();
    registry_ = await h.start(pluginRegistryService, {
      ...BASE_ENV,
      ...registryEnv({ BackendHost__RevokedSignerFingerprints__0: corpus.signerFingerprint }),
    });
    const report = (await asOperator("GET", "/api/plugins/signature-report")).json<{
      items: Array<{ status: string; code: string }>;
    }>();
    expect(report.items).toEqual([
      expect.objectContaining({ pluginId: "hello", status: "invalid", code: "revoked-signer" }),
    ]);
    expect((await asOperator("GET", "/api/plugins/security/trusted-signers")).json()).toEqual([
      expect.objectContaining({ revoked: true }),
    ]);
    // The restart loaded the stored package again and refused it (rehydration), saying why.
    expect((await asOperator("GET", "/api/plugins")).json()).toEqual([
      expect.objectContaining({
        pluginId: "hello",
        trustStatus: "refused",
        refusedReason: expect.stringMatching(/^revoked-signer: /),
      }),
    ]);
    const audit = (await asOperator("GET", "/api/plugins/audit")).json<{
      items: Array<{ action: string; outcome: string; actor: string }>;
    }>();
    expect(audit.items[0]).toMatchObject({
      action: "verify",
      outcome: "failed",
      actor: "svc:plugin-registry",
    });
    expect((await asOperator("DELETE", "/api/plugins/hello")).status).toBe(204);
  });
});

describe("the plugins' audit", () => {
  it("keeps entries for BackendHost:PluginAuditRetentionDays, deleting older ones at the registry's start", async () => {
    const aged = async (days: number, reason: string) => {
      const [row] = await h.sql(
        `INSERT INTO plugin_registry.audit (at, actor, action, plugin_id, outcome, reason)
         VALUES (now() - make_interval(days => $1), 'test', 'install', 'aged', 'failed', $2) RETURNING id::text`,
        [days, reason],
      );
      return row?.id as string;
    };
    const old = await aged(40, "forty days ago");
    const young = await aged(20, "twenty days ago");
    const kept = async () =>
      (
        await h.sql("SELECT id::text FROM plugin_registry.audit WHERE id = ANY($1::bigint[]) ORDER BY id", [
          [old, young],
        ])
      ).map((r) => r.id as string);
    expect(await kept()).toEqual([old, young]);
    await registry_.stop();
    registry_ = await h.start(pluginRegistryService, {
      ...BASE_ENV,
      ...registryEnv({ BackendHost__PluginAuditRetentionDays: "30" }),
    });
    await until(async () => !(await kept()).includes(old), 10_000, 100);
    expect(await kept()).toEqual([young]);
    const listed = (await asOperator("GET", "/api/plugins/audit?pluginId=aged")).json<{
      items: Array<{ reason: string }>;
    }>();
    expect(listed.items.map((i) => i.reason)).toEqual(["twenty days ago"]);
  });
});

describe("what a plugin author gets", () => {
  it("the example plugin in the repo is signed by the development signer and its descriptor is valid", async () => {
    const signer = createPublicKey(readFileSync(join(EXAMPLE_PLUGIN_DIR, "..", "dev-signer.pub.pem")));
    expect(
      await verifyPackage(EXAMPLE_PLUGIN_DIR, {
        trusted: [{ publisherId: "svc-dev", displayName: "dev", publicKey: signer }],
      }),
    ).toMatchObject({ ok: true, signed: true });
    const registry: unknown = JSON.parse(readFileSync(join(EXAMPLE_PLUGIN_DIR, "registry.json"), "utf8"));
    expect(validateRegistry(registry, { hostVersion: HOST_VERSION, installed: new Map() })).toEqual([]);
    // Installed through the API, as make dev does, by a registry that trusts the development signer.
    await registry_.stop();
    registry_ = await h.start(pluginRegistryService, {
      ...BASE_ENV,
      ...devSignerEnv(),
    });
    const installed = await upload(await examplePackage());
    expect(installed.status, installed.text).toBe(201);
    expect(installed.json()).toMatchObject({
      pluginId: "hello",
      publisherId: "svc-dev",
      events: ["hello.greeted"],
    });
    expect((await asOperator("DELETE", "/api/plugins/hello")).status).toBe(204);
  });

  it("make dev's example step adds hello to the end of workspace default's chain, keeping what the developer put there", async () => {
    await registry_.stop();
    registry_ = await h.start(pluginRegistryService, {
      ...BASE_ENV,
      ...registryEnv(),
      ...devSignerEnv(registryEnv()),
    });
    await seedDemo(h.db.url, { withAdmin: true });
    const token = await mintToken({
      scope: "platform",
      permissions: ["plugin.create", "plugin.read", "plugin.delete", "plugin.execute", "plugin.assign"],
    });
    // The developer's own plugin, first in the chain.
    const dir = join(work, "developers-own");
    writePlugin(dir, "greeter", "1.0.0");
    await signWithTrustedKey(dir, "greeter", "1.0.0");
    const chainPath = await inDefaultChain(await tgzOf(dir), "greeter", token);
    const chain = async () =>
      (await api("GET", chainPath, token))
        .json<{ chain: Array<{ pluginId: string }> }>()
        .chain.map((p) => p.pluginId);

    expect(await installExamplePlugin(base)).toContain("added to workspace default's chain");
    expect(await chain()).toEqual(["greeter", "hello"]);
    // The next start changes nothing but bringing the example up to the repository's copy (an update).
    const again = await installExamplePlugin(base);
    expect(again).toContain("in workspace default's chain already");
    expect(again).toContain("hello (installed already, kept current)");
    expect(await chain()).toEqual(["greeter", "hello"]);
  });

  it("publishes the JSON Schemas in docs/schemas/ as generated, and at a stable URL on the gateway", async () => {
    for (const [file, schema] of Object.entries(pluginSchemas())) {
      expect(JSON.parse(readFileSync(join(repoRoot, "docs", "schemas", file), "utf8")), file).toEqual(schema);
      const served = await http(`${base}/schemas/plugins/${file}`);
      expect(served.status).toBe(200);
      expect(served.headers["content-type"]).toMatch(/^application\/schema\+json/);
      expect(served.json()).toEqual(schema);
    }
    expect((await http(`${base}/schemas/plugins/nope.json`)).status).toBe(404);
  });
});

describe("what an installed plugin contributes", () => {
  it("adds its keys to the catalogue, its fields to masking, its events to the catalogue; uninstall takes them back", async () => {
    const admin = await mintToken({
      scope: "platform",
      permissions: ["plugin.create", "plugin.delete", "role.read", "flow.read", "webhook.manage"],
    });
    const get = (path: string) => api("GET", path, admin);
    const contributed = async () => ({
      keys: (await get("/api/rbac/permissions"))
        .json<Array<{ key: string; source: string }>>()
        .filter((k) => k.source === "hello"),
      events: (await get("/api/events/catalog")).json<Array<{ eventName: string }>>().map((e) => e.eventName),
      fields: (
        await h.sql<{ field_name: string }>(
          "SELECT field_name FROM webhook_dispatcher.sensitive_fields WHERE source = 'hello'",
        )
      ).map((r) => r.field_name),
    });
    await registry_.stop();
    registry_ = await h.start(pluginRegistryService, {
      ...BASE_ENV,
      ...registryEnv(),
    });
    // The earlier tests' uninstall of hello reaches rbac within moments (the registry's broadcast).
    await until(async () => (await contributed()).keys.length === 0, 10_000, 100);
    const before = await contributed();
    expect(before.keys).toEqual([]);
    expect(before.events).not.toContain("hello.greeted");

    const dir = join(work, "contributing");
    writePlugin(dir);
    const registry = JSON.parse(readFileSync(join(dir, "registry.json"), "utf8")) as Record<string, unknown>;
    const greeted = {
      description: "Someone was greeted",
      schema: {
        type: "object",
        properties: { name: { type: "string" } },
        required: ["name"],
        additionalProperties: false,
      },
      example: { name: "Ada" },
    };
    writeFileSync(
      join(dir, "registry.json"),
      JSON.stringify({ ...registry, events: ["hello.greeted"], eventSchemas: { "hello.greeted": greeted } }),
    );
    await signWithTrustedKey(dir, "hello", "1.0.0");
    const installed = await upload(await tgzOf(dir), "application/gzip", admin);
    expect(installed.status, installed.text).toBe(201);

    // Every replica sees it within a second of the broadcast (waiting up to 5 s here for a loaded machine).
    const deadline = Date.now() + 5_000;
    let now = await contributed();
    while (
      (now.keys.length === 0 || now.fields.length === 0 || !now.events.includes("hello.greeted")) &&
      Date.now() < deadline
    ) {
      await new Promise((r) => setTimeout(r, 50));
      now = await contributed();
    }
    expect(now.keys).toEqual([
      { key: "hello.greeting.read", source: "hello", description: "Declared by plugin hello" },
    ]);
    expect(now.fields).toEqual(["greeting"]);
    expect(now.events).toContain("hello.greeted");
    // The catalogue serves what its registry.json says of the event.
    const entry = (await get("/api/events/catalog"))
      .json<Array<{ eventName: string }>>()
      .find((e) => e.eventName === "hello.greeted");
    expect(entry).toEqual({ eventName: "hello.greeted", source: "hello", ...greeted });
    const subscription = await api("POST", "/api/webhooks", admin, {
      eventName: "hello.*",
      targetUrl: "https://hooks.example.com/h",
      secret: "s",
    });
    expect(subscription.json()).toMatchObject({ matchesKnownEvent: true });

    expect((await api("DELETE", "/api/plugins/hello", admin)).status).toBe(204);
    let after = await contributed();
    await until(
      async () => {
        after = await contributed();
        return (
          after.keys.length === 0 && after.fields.length === 0 && !after.events.includes("hello.greeted")
        );
      },
      5_000,
      50,
    ).catch(() => undefined);
    expect(after).toEqual({ keys: [], fields: [], events: before.events });
  });
});

describe("installing from the host's disk and from a package feed, and updating", () => {
  let feed: Server;
  let feedUrl: string;
  const admin = () =>
    mintToken({ scope: "platform", permissions: ["plugin.create", "plugin.read", "plugin.delete"] });
  const post = async (path: string, body: unknown) => api("POST", path, await admin(), body);

  /** A signed package of hello at `version`, as a directory. */
  async function helloAt(version: string, pluginId = "hello"): Promise<string> {
    const dir = join(work, `${pluginId}-${version}-${Date.now()}`);
    writePlugin(dir, pluginId, version);
    await signWithTrustedKey(dir, pluginId, version);
    return dir;
  }

  beforeAll(async () => {
    // A feed in the npm registry's layout on loopback: /<id>/-/<id>-<version>.tgz, files under package/.
    const tarballs = new Map<string, Buffer>();
    for (const version of ["1.0.0", "1.1.0"]) {
      const dir = await helloAt(version);
      const staged = join(work, `feed-${version}`);
      execFileSync("mkdir", ["-p", staged]);
      execFileSync("cp", ["-r", dir, join(staged, "package")]);
      const file = join(work, `hello-${version}.tgz`);
      await createTar({ gzip: true, cwd: staged, file, portable: true }, ["package"]);
      tarballs.set(`/hello/-/hello-${version}.tgz`, readFileSync(file));
    }
    feed = createServer((request, response) => {
      const body = tarballs.get(request.url ?? "");
      response.writeHead(body === undefined ? 404 : 200, { "content-type": "application/octet-stream" });
      response.end(body);
    });
    await new Promise<void>((resolve) => feed.listen(0, "127.0.0.1", resolve));
    feedUrl = `http://127.0.0.1:${(feed.address() as AddressInfo).port}`;
    await registry_.stop();
    registry_ = await h.start(pluginRegistryService, {
      ...BASE_ENV,
      ...registryEnv({ BackendHost__PluginLocalRoots__0: work, BackendHost__PluginFeedUrl: feedUrl }),
    });
  });
  afterAll(() => new Promise<void>((resolve) => feed.close(() => resolve())));

  it("installs a directory and an archive under the local roots, and nothing outside them", async () => {
    const local = await post("/api/plugins/install/local", { path: await helloAt("1.0.0") });
    expect(local.status, local.text).toBe(201);
    expect((await asOperator("DELETE", "/api/plugins/hello")).status).toBe(204);
    const archive = await post("/api/plugins/install/local", { path: corpus.archives.goodTgz });
    expect(archive.status, archive.text).toBe(201);
    expect((await asOperator("DELETE", "/api/plugins/hello")).status).toBe(204);
    expect((await post("/api/plugins/install/local", { path: "/etc" })).status).toBe(404);
    expect((await post("/api/plugins/install/local", { path: join(work, "..", "..", "etc") })).status).toBe(
      404,
    );
    symlinkSync("/etc", join(work, "link-out"));
    expect((await post("/api/plugins/install/local", { path: join(work, "link-out") })).status).toBe(404);
  });

  it("installs from the feed, updates to a newer version, refuses a downgrade unless asked", async () => {
    const installed = await post("/api/plugins/install/nuget", { packageId: "hello", version: "1.0.0" });
    expect(installed.status, installed.text).toBe(201);
    expect((await post("/api/plugins/install/nuget", { packageId: "hello", version: "9.9.9" })).status).toBe(
      404,
    );
    const updated = await post("/api/plugins/hello/update/nuget", { packageId: "hello", version: "1.1.0" });
    expect(updated.status, updated.text).toBe(200);
    expect(updated.json()).toMatchObject({ pluginId: "hello", version: "1.1.0" });
    const downgrade = await post("/api/plugins/hello/update/local", { path: await helloAt("1.0.0") });
    expect(downgrade.status).toBe(409);
    const allowed = await post("/api/plugins/hello/update/local?allowDowngrade=true", {
      path: await helloAt("1.0.0"),
    });
    expect(allowed.status, allowed.text).toBe(200);
    expect(allowed.json()).toMatchObject({ version: "1.0.0" });
    const other = await post("/api/plugins/hello/update/local", { path: await helloAt("2.0.0", "other") });
    expectRefused(other, "plugin-id-mismatch");
    expect(
      (await post("/api/plugins/nothere/update/local", { path: await helloAt("2.0.0", "nothere") })).status,
    ).toBe(404);
    const listed = (await asOperator("GET", "/api/plugins")).json<
      Array<{ pluginId: string; version: string }>
    >();
    expect(listed).toEqual([expect.objectContaining({ pluginId: "hello", version: "1.0.0" })]);
    expect((await asOperator("DELETE", "/api/plugins/hello")).status).toBe(204);
  });

  it("updates by upload (the archive as the body, or curl -F), keeping the plugin's chain place; the same checks and downgrade rule as install", async () => {
    const token = await mintToken({
      scope: "platform",
      permissions: [
        "plugin.create",
        "plugin.read",
        "plugin.delete",
        "plugin.execute",
        "plugin.assign",
        "extension.read",
        "extension.update",
      ],
    });
    const chainPath = await inDefaultChain(await tgzOf(await helloAt("1.0.0")), "hello", token);
    const themePath = `/api/themes/workspaces/${DEMO.workspaceKey}`;
    const themed = await api("PUT", themePath, token, { themePluginId: "hello" });
    expect(themed.status, themed.text).toBe(200);
    const updateWith = (bytes: Buffer, query = "") =>
      api("POST", `/api/plugins/hello/update${query}`, token, bytes, { contentType: "application/gzip" });

    const updated = await updateWith(await tgzOf(await helloAt("1.1.0")));
    expect(updated.status, updated.text).toBe(200);
    expect(updated.json()).toMatchObject({ pluginId: "hello", version: "1.1.0", state: "active" });
    const chain = (await api("GET", chainPath, token)).json<{
      chain: Array<{ pluginId: string; version: string }>;
    }>().chain;
    expect(chain).toEqual([expect.objectContaining({ pluginId: "hello", version: "1.1.0" })]);
    expect((await api("GET", themePath, token)).json()).toMatchObject({ themePluginId: "hello" });

    // The downgrade rule, the plugin id, the signature: as for install.
    expect((await updateWith(await tgzOf(await helloAt("1.0.0")))).status).toBe(409);
    const back = await updateWith(await tgzOf(await helloAt("1.0.0")), "?allowDowngrade=true");
    expect(back.status, back.text).toBe(200);
    expect(back.json()).toMatchObject({ version: "1.0.0" });
    expectRefused(await updateWith(await tgzOf(await helloAt("2.0.0", "other"))), "plugin-id-mismatch");
    expectRefused(await updateWith(await tgzOf(corpus.dirs.untrusted)), "untrusted-signer");
    const missing = await api(
      "POST",
      "/api/plugins/nothere/update",
      token,
      await tgzOf(await helloAt("2.0.0", "nothere")),
      {
        contentType: "application/gzip",
      },
    );
    expect(missing.status).toBe(404);

    // As a form, the way curl -F sends it.
    const file = join(work, "hello-1.2.0.tgz");
    writeFileSync(file, await tgzOf(await helloAt("1.2.0")));
    const { stdout } = await promisify(execFile)("curl", [
      "-s",
      "-w",
      '\n{"status":%{http_code}}',
      "-H",
      `authorization: Bearer ${token}`,
      "-F",
      `package=@${file}`,
      `${base}/api/plugins/hello/update`,
    ]);
    expect(JSON.parse(stdout.trim().split("\n").pop() as string)).toEqual({ status: 200 });
    expect((await api("GET", chainPath, token)).json()).toMatchObject({
      chain: [expect.objectContaining({ pluginId: "hello", version: "1.2.0" })],
    });
    expect((await asOperator("DELETE", "/api/plugins/hello")).status).toBe(204);
  });
});
