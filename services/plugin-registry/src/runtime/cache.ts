/**
 * The local extraction cache: an active plugin's package unpacked once per replica under
 * `<BackendHost:PluginCacheDir>/<package sha256>/`, and verified again, with the trust settings in force,
 * every time the runtime loads it. A cached copy that no longer verifies (edited on disk, or its signer
 * revoked since) is thrown away and unpacked again from the shared store; if the fresh copy fails too, the
 * load is refused. Copies appear atomically (unpacked beside, then renamed).
 */
import { randomUUID } from "node:crypto";
import { mkdir, readdir, rename, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import type { PackageStore } from "@svc/plugin-package/store";

import { checkPackage, type OpenedPackage, packageRoot, storedPackage, unpack } from "../packages.js";
import type { PluginRegistryConfig } from "../settings.js";

export interface CachedPackage {
  /** The package root on disk. */
  readonly root: string;
  readonly opened: OpenedPackage;
}

export class ExtractionCache {
  readonly dir: string;
  /** Where each plugin process gets its own folder, its package linked in (worker-host.ts). */
  readonly slotsDir: string;

  constructor(
    private readonly store: PackageStore,
    private readonly settings: PluginRegistryConfig["backendHost"],
    private readonly hostVersion: string,
  ) {
    this.dir = settings.pluginCacheDir || join(tmpdir(), "svc-plugin-cache");
    this.slotsDir = join(this.dir, "processes");
  }

  /** The verified package `sha256`, unpacked; a 422 `SVC_PLUGIN_REFUSED` when it does not verify. */
  async prepare(sha256: string): Promise<CachedPackage> {
    if (!/^[0-9a-f]{64}$/.test(sha256)) throw new Error("not a package hash");
    const home = join(this.dir, sha256);
    if (await exists(home)) {
      try {
        return await this.check(home);
      } catch {
        // Edited on disk, half removed, or refused now: unpacked again below, and checked once more.
        await rm(home, { recursive: true, force: true });
      }
    }
    await this.fill(sha256, home);
    return this.check(home);
  }

  /**
   * Removes cached packages for which `keep` says no (asked once the directory is read, so it sees loads
   * that started meanwhile): those of uninstalled or replaced versions.
   */
  async prune(keep: (sha256: string) => boolean): Promise<void> {
    let entries: string[];
    try {
      entries = await readdir(this.dir);
    } catch {
      return;
    }
    await Promise.all(
      entries
        // Unpacked packages only (named by their hash): not the processes' slots, not copies being made.
        .filter((name) => PACKAGE_DIR.test(name) && !keep(name))
        .map((name) => rm(join(this.dir, name), { recursive: true, force: true })),
    );
  }

  private async check(home: string): Promise<CachedPackage> {
    const root = await packageRoot(home);
    const opened = await checkPackage(root, {
      settings: this.settings,
      hostVersion: this.hostVersion,
      trustOnly: true,
    });
    return { root, opened };
  }

  private async fill(sha256: string, home: string): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const scratch = join(this.dir, `${sha256}.tmp-${randomUUID()}`);
    await mkdir(scratch, { mode: 0o700 });
    try {
      await unpack(await storedPackage(this.store, sha256), scratch, this.settings);
      await rename(scratch, home).catch(async (error: NodeJS.ErrnoException) => {
        // Another load of the same package won the race: its copy is the same bytes.
        if (error.code !== "ENOTEMPTY" && error.code !== "EEXIST") throw error;
      });
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  }
}

const PACKAGE_DIR = /^[0-9a-f]{64}$/;

async function exists(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}
