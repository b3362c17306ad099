/**
 * The UI-asset manifest (`plugin-ui-assets.manifest.json`): what the active
 * plugins bring to the browser, emitted by the platform as canonical JSON (RFC 8785, the `canonicalize`
 * library) into one NATS KV value, so that every gateway replica serves the same document and no reader
 * ever sees a partial one (a KV value is replaced whole). The files it names are copied, once per plugin
 * version, from the verified package to the asset object store, where the gateway serves them at
 * `/plugin-assets/<pluginId>/<version>/<path>`; the manifest's paths are relative to `/plugin-assets/`.
 *
 * Every replica publishes after it reconciles its runtime; a write happens only when the content (all but
 * `generatedAtUtc`) changed, with a compare-and-set on the KV revision so concurrent replicas do not
 * overwrite each other with the same content.
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";

import type { KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { ensureBucket, lazily } from "@svc/bus";
import { type Queries, sql } from "@svc/db";
import type { Logger } from "@svc/observability";
import { listPackageFiles } from "@svc/plugin-package";
import { ASSET_HASHES_KEY, AssetStore, MANIFEST_BUCKET, MANIFEST_KEY } from "@svc/plugin-package/store";
import canonicalize from "canonicalize";

import type { PluginRow } from "../common.js";

export interface UiAssetManifest {
  generatedAtUtc: string;
  entries: Array<{ pluginId: string; surface: string; entryPath: string }>;
  styleEntries: Array<{ pluginId: string; surface: string; stylePath: string }>;
  workspaceTemplates: Array<{ pluginId: string; templatePath: string }>;
}

const assetName = (pluginId: string, version: string, path: string) => `${pluginId}/${version}/${path}`;

export class UiManifestPublisher {
  private readonly kv: ReturnType<typeof lazily<KV>>;
  readonly assets: AssetStore;
  /** The hash of each `ui/` file of the verified packages loaded here, by package hash and path. */
  private readonly hashes = new Map<string, ReadonlyMap<string, string>>();

  constructor(
    nc: NatsConnection,
    prefix: string,
    replicas: number,
    private readonly log: Logger,
  ) {
    this.assets = new AssetStore(nc, prefix, replicas);
    this.kv = lazily(() => ensureBucket(nc, MANIFEST_BUCKET(prefix), { history: 1, replicas }));
  }

  private bucket(): Promise<KV> {
    return this.kv.get();
  }

  /** After a NATS reconnect: buckets are opened (or created) again on next use. */
  reset(): void {
    this.kv.reset();
    this.assets.reset();
  }

  /** Copies a loaded plugin's `ui/` files to the asset store, unless this version's are there already. */
  async publishAssets(row: PluginRow, root: string): Promise<void> {
    const files = (await listPackageFiles(root)).filter((f) => f.path.startsWith("ui/"));
    const hashes = new Map<string, string>();
    for (const file of files) {
      const bytes = await readFile(file.full);
      hashes.set(file.path, createHash("sha256").update(bytes).digest("hex"));
      const name = assetName(row.plugin_id, row.version, file.path);
      if (await this.assets.has(name)) continue;
      await this.assets.put(name, bytes);
    }
    this.hashes.set(row.package_sha256, hashes);
  }

  /**
   * The asset hashes of the active ones of `plugins`: those of the verified packages loaded here, and those
   * another replica stored (`stored`) for a version still active, so replicas that loaded different sets a
   * moment apart add up instead of overwriting each other.
   */
  assetHashes(plugins: readonly PluginRow[], stored: Record<string, string> = {}): Record<string, string> {
    const active = plugins.filter((p) => p.state === "active");
    const versions = new Set(active.map((r) => `${r.plugin_id}/${r.version}/`));
    const out: Record<string, string> = {};
    for (const [name, hash] of Object.entries(stored)) {
      if (versions.has(name.split("/").slice(0, 2).join("/") + "/")) out[name] = hash;
    }
    for (const row of active) {
      for (const [path, hash] of this.hashes.get(row.package_sha256) ?? []) {
        out[assetName(row.plugin_id, row.version, path)] = hash;
      }
    }
    const kept = new Set(active.map((r) => r.package_sha256));
    for (const sha256 of this.hashes.keys()) if (!kept.has(sha256)) this.hashes.delete(sha256);
    return out;
  }

  /** The manifest the active ones of `plugins` (all plugins, by id) make. */
  async build(db: Queries, plugins: readonly PluginRow[]): Promise<UiAssetManifest> {
    const rows = plugins.filter((p) => p.state === "active");
    const templates = await db.any<{ plugin_id: string; template_path: string }>(sql`
      SELECT d.plugin_id, d.template_path FROM plugin_registry.theme_definitions d
      JOIN plugin_registry.plugins p ON p.plugin_id = d.plugin_id AND p.version = d.version
      WHERE p.state = 'active' AND d.is_active AND d.surface = 'workspace'
      ORDER BY d.plugin_id, d.template_path`);
    return {
      generatedAtUtc: new Date().toISOString(),
      entries: rows.flatMap((r) =>
        (r.registry.uiAssets?.entries ?? []).map((e) => ({
          pluginId: r.plugin_id,
          surface: e.surface,
          entryPath: assetName(r.plugin_id, r.version, e.path),
        })),
      ),
      styleEntries: rows.flatMap((r) =>
        (r.registry.uiAssets?.styles ?? []).map((e) => ({
          pluginId: r.plugin_id,
          surface: e.surface,
          stylePath: assetName(r.plugin_id, r.version, e.path),
        })),
      ),
      workspaceTemplates: [...new Set(templates.map((t) => `${t.plugin_id}\u0000${t.template_path}`))].map(
        (k) => {
          const [pluginId, templatePath] = k.split("\u0000") as [string, string];
          return { pluginId, templatePath };
        },
      ),
    };
  }

  /** Writes the manifest when its content changed; true when this call wrote it. */
  async publish(db: Queries, plugins: readonly PluginRow[]): Promise<boolean> {
    const next = await this.build(db, plugins);
    const kv = await this.bucket();
    // The hashes first: an asset the manifest names has its hash by the time a browser asks for it.
    const stored = await kv.get(ASSET_HASHES_KEY);
    const before = stored?.operation === "PUT" ? stored.string() : null;
    const hashes = canonicalize(this.assetHashes(plugins, parseHashes(before))) ?? "{}";
    if (before !== hashes) {
      await kv.put(ASSET_HASHES_KEY, new TextEncoder().encode(hashes));
    }
    for (let attempt = 0; attempt < 3; attempt++) {
      const current = await kv.get(MANIFEST_KEY);
      if (current !== null && current.operation === "PUT" && sameContent(current.string(), next))
        return false;
      const bytes = new TextEncoder().encode(canonicalize(next));
      try {
        if (current === null || current.operation !== "PUT") await kv.create(MANIFEST_KEY, bytes);
        else await kv.update(MANIFEST_KEY, bytes, current.revision);
        this.log.info({ entries: next.entries.length }, "UI-asset manifest published");
        return true;
      } catch {
        // Another replica wrote meanwhile: look again.
      }
    }
    return false;
  }
}

function parseHashes(text: string | null): Record<string, string> {
  try {
    const value: unknown = text === null ? {} : JSON.parse(text);
    return value !== null && typeof value === "object" ? (value as Record<string, string>) : {};
  } catch {
    return {};
  }
}

function sameContent(stored: string, next: UiAssetManifest): boolean {
  try {
    const content = (m: UiAssetManifest) =>
      canonicalize({
        entries: m.entries,
        styleEntries: m.styleEntries,
        workspaceTemplates: m.workspaceTemplates,
      });
    return content(JSON.parse(stored) as UiAssetManifest) === content(next);
  } catch {
    return false;
  }
}
