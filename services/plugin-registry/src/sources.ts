/**
 * Where a package can come from besides an upload: the host's disk (only under the configured
 * BackendHost:PluginLocalRoots) and the configured package feed (BackendHost:PluginFeedUrl, the spec's
 * "nuget": an npm-registry-style feed serving `<feed>/<id>/-/<id>-<version>.tgz`). Either way the bytes
 * go into the package object store, so every replica reads the same package.
 */
import { lstat, readFile, realpath } from "node:fs/promises";
import { relative, resolve } from "node:path";

import { ErrorCode, NotFoundError, SvcError } from "@svc/errors";
import { PackageError, packDirectory } from "@svc/plugin-package";

import { refused } from "./packages.js";
import type { PluginRegistryConfig } from "./settings.js";

/** The bytes of a package on the host's disk: an archive file, or a directory packed as a .tgz. */
export async function readLocal(
  settings: PluginRegistryConfig["backendHost"],
  path: string,
): Promise<Buffer> {
  const roots = await Promise.all(settings.pluginLocalRoots.map((r) => realpath(r).catch(() => undefined)));
  const allowed = roots.filter((r): r is string => r !== undefined);
  if (allowed.length === 0) {
    throw new SvcError(
      ErrorCode.Forbidden,
      "No local plugin root is configured (BackendHost:PluginLocalRoots).",
    );
  }
  const target = await realpath(resolve(path)).catch(() => undefined);
  // The real path (links resolved) must lie under a root: a link out of the roots is refused too.
  if (
    target === undefined ||
    !allowed.some((root) => target === root || !relative(root, target).startsWith(".."))
  ) {
    throw new NotFoundError("No plugin package at that path under the configured local roots.");
  }
  const stat = await lstat(target);
  if (stat.isFile()) {
    if (stat.size > settings.pluginMaxExpandedBytes) {
      throw refused("archive", `The archive is larger than ${settings.pluginMaxExpandedBytes} bytes.`);
    }
    return readFile(target);
  }
  if (!stat.isDirectory()) throw refused("archive", "The path is neither a directory nor an archive.");
  try {
    return (
      await packDirectory(target, {
        maxFiles: settings.pluginMaxFiles,
        maxBytes: settings.pluginMaxExpandedBytes,
      })
    ).bytes;
  } catch (error) {
    if (error instanceof PackageError) {
      throw refused("archive", error.message, error.path === undefined ? {} : { path: error.path });
    }
    throw error;
  }
}

/** The bytes of `<feed>/<id>/-/<id>-<version>.tgz`, within the size limit and the request timeout. */
export async function readFeed(
  settings: PluginRegistryConfig["backendHost"],
  packageId: string,
  version: string,
  timeoutMs: number,
): Promise<Buffer> {
  const feed = settings.pluginFeedUrl;
  if (feed === null) {
    throw new SvcError(ErrorCode.Forbidden, "No plugin feed is configured (BackendHost:PluginFeedUrl).");
  }
  const url = `${feed.replace(/\/$/, "")}/${packageId}/-/${packageId}-${version}.tgz`;
  let response: Response;
  try {
    response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), redirect: "error" });
  } catch (error) {
    throw new SvcError(
      ErrorCode.ServiceUnavailable,
      `The plugin feed could not be reached (${(error as Error).name}).`,
      {
        extensions: { service: "plugin-feed" },
      },
    );
  }
  if (response.status === 404) {
    throw new NotFoundError(`The feed has no package '${packageId}' version '${version}'.`);
  }
  if (!response.ok || response.body === null) {
    throw new SvcError(ErrorCode.ServiceUnavailable, `The plugin feed answered ${response.status}.`, {
      extensions: { service: "plugin-feed" },
    });
  }
  const limit = settings.pluginMaxExpandedBytes;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response.body) {
    size += (chunk as Uint8Array).length;
    if (size > limit) throw refused("archive", `The feed's package is larger than ${limit} bytes.`);
    chunks.push(Buffer.from(chunk as Uint8Array));
  }
  return Buffer.concat(chunks);
}
