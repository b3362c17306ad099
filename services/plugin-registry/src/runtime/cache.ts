/**
 * The local extraction cache: an active plugin's package unpacked once per replica under
 * `<BackendHost:PluginCacheDir>/<package sha256>/`, and verified again, with the trust settings in force,
 * every time the runtime loads it. A cached copy that no longer verifies (edited on disk, or its signer
 * revoked since) is thrown away and unpacked again from the shared store; if the fresh copy fails too, the
 * load is refused. Copies appear atomically (unpacked beside, then renamed). A package's folder is worked on
 * by one thing at a time (`exclusive`): a prune decides to remove a copy and removes it without a load
 * preparing that copy in between (an uninstall's prune used to remove a copy that a reinstall's activation
 * had just found there, so the plugin's files vanished before its process was given them).
 *
 * Without a configured folder each deployment (database and subject prefix) has its own under the system's
 * temporary folder: replicas of one deployment on one host share it; a second deployment on the same host
 * (a test run, a benchmark) never prunes the first one's copies.
 */
import { createHash, randomUUID } from "node:crypto";
import { mkdir, readdir, rename, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { packageRoot } from "@svc/plugin-package";
import type { PackageStore } from "@svc/plugin-package/store";

import { checkPackage, type OpenedPackage, storedPackage, unpack } from "../packages.js";
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

  /** The last piece of work queued on each package's folder (`exclusive`). */
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(
    private readonly store: PackageStore,
    private readonly settings: PluginRegistryConfig["backendHost"],
    private readonly hostVersion: string,
    /** What tells this deployment from others on the host (its database and subject prefix). */
    deployment = "",
  ) {
    this.dir =
      settings.pluginCacheDir ||
      join(tmpdir(), "svc-plugin-cache", createHash("sha256").update(deployment).digest("hex").slice(0, 16));
    this.slotsDir = join(this.dir, "processes");
  }

  /** Runs `work` on one package's folder once the work queued on it before has ended. */
  private exclusive<T>(sha256: string, work: () => Promise<T>): Promise<T> {
    const run = (this.queues.get(sha256) ?? Promise.resolve()).then(work, work);
    const tail = run.catch(() => undefined);
    this.queues.set(sha256, tail);
    void tail.then(() => {
      if (this.queues.get(sha256) === tail) this.queues.delete(sha256);
    });
    return run;
  }

  /** The verified package `sha256`, unpacked; a 422 `SVC_PLUGIN_REFUSED` when it does not verify. */
  async prepare(sha256: string): Promise<CachedPackage> {
    if (!PACKAGE_DIR.test(sha256)) throw new Error("not a package hash");
    return this.exclusive(sha256, () => this.prepareNow(sha256));
  }

  private async prepareNow(sha256: string): Promise<CachedPackage> {
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
   * Removes cached packages for which `keep` says no (asked for each copy just before it is removed, with
   * no load of it under way, so it sees loads that started meanwhile): those of uninstalled or replaced
   * versions.
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
        .map((name) =>
          this.exclusive(name, async () => {
            if (!keep(name)) await rm(join(this.dir, name), { recursive: true, force: true });
          }),
        ),
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
