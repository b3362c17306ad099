/**
 * The UI-asset manifest and the plugin assets it names, served anonymously:
 * `GET <BackendHost__PluginManifestUrl>` (default `/manifests/plugin-ui-assets.manifest.json`) answers the
 * manifest the plugin registry last published (404 until it has published one), from a watch on its KV value,
 * so every replica serves a whole document; `GET /plugin-assets/<pluginId>/<version>/<path>` streams a file
 * of an active plugin's `ui/` directory from the asset object store (immutable: a version's files never
 * change), only when its bytes have the hash the registry took from the verified package (bytes replaced in
 * the object store are not served).
 */
import { createHash } from "node:crypto";

import type { KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { ensureBucket, KvWatches, patiently } from "@svc/bus";
import { NotFoundError } from "@svc/errors";
import type { Logger } from "@svc/observability";
import { ASSET_HASHES_KEY, AssetStore, MANIFEST_BUCKET, MANIFEST_KEY } from "@svc/plugin-package/store";
import type { ServiceDeps } from "@svc/runtime";
import type { FastifyInstance } from "fastify";

import { contentTypeOf, etagOf, notModified } from "../static-files.js";

/** The latest published manifest and asset hashes, kept by watches on their KV keys. */
export class ManifestWatch {
  private current: { bytes: Buffer; etag: string } | undefined;
  private hashes = new Map<string, string>();
  private readonly watches = new KvWatches();

  async start(kv: KV): Promise<void> {
    const follow = this.watches.renew();
    await follow(kv, MANIFEST_KEY, (entry) => {
      if (entry.operation === "PUT") {
        const bytes = Buffer.from(entry.value);
        this.current = { bytes, etag: etagOf(bytes) };
      } else {
        this.current = undefined;
      }
    });
    await follow(kv, ASSET_HASHES_KEY, (entry) => {
      let next = new Map<string, string>();
      try {
        if (entry.operation === "PUT") {
          next = new Map(Object.entries(JSON.parse(entry.string()) as Record<string, string>));
        }
      } catch {
        // Not JSON: no asset is served until the registry writes it again.
      }
      this.hashes = next;
    });
  }

  get(): { bytes: Buffer; etag: string } | undefined {
    return this.current;
  }

  /** The SHA-256 (hex) an asset's bytes must have; undefined for one no verified package holds. */
  hashOf(name: string): string | undefined {
    return this.hashes.get(name);
  }

  stop(): void {
    this.watches.stop();
  }
}

export async function registerUiAssets(
  app: FastifyInstance,
  options: {
    readonly nc: NatsConnection;
    readonly prefix: string;
    /** BackendHost:NatsReplicas. */
    readonly replicas: number;
    readonly manifestUrl: string;
    readonly log: Logger;
    readonly reprovision: ServiceDeps["reprovision"];
  },
): Promise<void> {
  const watch = new ManifestWatch();
  const assets = new AssetStore(options.nc, options.prefix, options.replicas);
  const open = () =>
    ensureBucket(options.nc, MANIFEST_BUCKET(options.prefix), { history: 1, replicas: options.replicas });
  await patiently("UI-asset manifest watch", async () => watch.start(await open()), options.log);
  options.reprovision("UI-asset manifest watch", async () => {
    assets.reset();
    await watch.start(await open());
  });
  app.addHook("onClose", async () => watch.stop());

  app.get(options.manifestUrl, async (request, reply) => {
    const current = watch.get();
    if (current === undefined) throw new NotFoundError("No UI-asset manifest has been published yet.");
    void reply.header("cache-control", "no-cache").header("etag", current.etag);
    if (notModified(request.headers, current.etag)) return reply.code(304).send();
    return reply.type("application/json; charset=utf-8").send(current.bytes);
  });

  app.get<{ Params: { pluginId: string; version: string; "*": string } }>(
    "/plugin-assets/:pluginId/:version/*",
    async (request, reply) => {
      const { pluginId, version } = request.params;
      const path = request.params["*"];
      const name = `${pluginId}/${version}/${path}`;
      // Only names the registry writes: `<id>/<version>/ui/…`, no dot segment, no control character or
      // backslash; a file name may be any other Unicode text (`Ａ.txt`, an emoji), as packages may hold.
      const valid =
        /^[a-z][a-z0-9-]{1,62}$/.test(pluginId) &&
        /^[0-9A-Za-z.+-]{1,64}$/.test(version) &&
        path.length <= 1_024 &&
        // eslint-disable-next-line no-control-regex
        /^ui(\/(?!\.{1,2}(?:\/|$))[^/\\\u0000-\u001f\u007f]+)+$/u.test(path);
      const expected = valid ? watch.hashOf(name) : undefined;
      const bytes = expected !== undefined ? await assets.get(name) : null;
      if (bytes === null) throw new NotFoundError(`No plugin asset '${name}'.`);
      if (createHash("sha256").update(bytes).digest("hex") !== expected) {
        options.log.error(
          { asset: name },
          "a plugin asset in the object store does not match its verified package: not served",
        );
        throw new NotFoundError(`No plugin asset '${name}'.`);
      }
      return reply
        .type(contentTypeOf(path))
        .header("cache-control", "public, max-age=31536000, immutable")
        .send(bytes);
    },
  );
}
