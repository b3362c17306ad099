/**
 * `svc-plugin dev`: the plugin author's loop against a running stack. It signs a copy of the package with a
 * development key (the author's directory is not written to), packs it, installs it (or updates it when it
 * is installed: its places in chains, theme choices and state are kept), activates it, and, once, puts it at
 * the front of a workspace's chain so that its routes, events and surface template can be tried there. Then
 * it watches the directory and does the same on every change, printing what the stack answered.
 */
import { createPrivateKey, type KeyObject } from "node:crypto";
import { watch } from "node:fs";
import { cp, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";

import { packDirectory } from "./archive.js";
import { validated } from "./author.js";
import { hashDirectory } from "./files.js";
import { SIGNATURE_FILE, signManifest } from "./manifest.js";

/**
 * The development signer of the platform's repository (examples/plugins/dev-signer.pem): its private key is
 * public, and `make dev` trusts its public half. Never trust it anywhere else.
 */
export const DEV_SIGNER_PEM = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgaZ6Q0WEpDaubHcRH
2kqyZ7sA3JNy3m+VFfXxyMCMa1+hRANCAASxgMK591Bu/IIZCeZZbXYa0eyGyyoS
Q5N+rL2ULc2raHtTendxX3XbqGSaOJTC/HZexbVxuxXJwdDwSQh+zTl5
-----END PRIVATE KEY-----
`;

export interface DevOptions {
  /** The package directory. */
  readonly dir: string;
  /** The gateway, e.g. http://localhost:8080. */
  readonly url: string;
  /** The signing key; the development signer when absent. */
  readonly key?: KeyObject;
  /** A bearer token, or a user name and password to sign in with. */
  readonly token?: string;
  readonly username?: string;
  readonly password?: string;
  /** The workspace whose chain the plugin joins (at the front) when it is not in it; none when null. */
  readonly workspace: string | null;
  readonly print: (line: string) => void;
  /** Stops watching. */
  readonly signal: AbortSignal;
}

interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown> | null;
}

/** The problem document's gist: its detail, the file it names, each rule it lists. */
function problemText(answer: Answer): string {
  const b = answer.body ?? {};
  const text = (value: unknown) => (typeof value === "string" ? value : "");
  const lines = [`${answer.status} ${text(b.reason) || text(b.code) || text(b.title)}: ${text(b.detail)}`];
  if (typeof b.path === "string") lines[0] += ` (${b.path})`;
  if (Array.isArray(b.errors)) {
    for (const e of b.errors as Array<{ field?: string; message?: string }>) {
      lines.push(`  ${e.field ?? ""}: ${e.message ?? ""}`);
    }
  }
  return lines.join("\n");
}

class Session {
  private token: string | undefined;
  constructor(private readonly options: DevOptions) {
    this.token = options.token;
  }

  private async signIn(): Promise<string> {
    const { username, password, url } = this.options;
    if (username === undefined || password === undefined) {
      throw new Error("the token was refused and there is no user name and password to sign in with");
    }
    const answer = await this.raw("POST", "/api/auth/login", JSON.stringify({ username, password }), {
      "content-type": "application/json",
    });
    if (answer.status !== 200 || typeof answer.body?.accessToken !== "string") {
      throw new Error(`signing in at ${url} as ${username} failed: ${problemText(answer)}`);
    }
    return answer.body.accessToken;
  }

  private async raw(
    method: string,
    path: string,
    body?: string | Buffer,
    headers: Record<string, string> = {},
  ): Promise<Answer> {
    const response = await fetch(new URL(path, this.options.url), {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await response.text();
    let parsed: Record<string, unknown> | null = null;
    try {
      parsed = text.length > 0 ? (JSON.parse(text) as Record<string, unknown>) : null;
    } catch {
      parsed = { detail: text.slice(0, 200) };
    }
    return { status: response.status, body: parsed };
  }

  /** A call with the session's token; signs in (again) when there is none or it was refused. */
  async call(
    method: string,
    path: string,
    body?: unknown,
    contentType = "application/json",
  ): Promise<Answer> {
    const payload = body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body);
    const send = async () =>
      this.raw(method, path, payload, {
        authorization: `Bearer ${this.token}`,
        ...(payload === undefined ? {} : { "content-type": contentType }),
      });
    this.token ??= await this.signIn();
    let answer = await send();
    if (answer.status === 401 && this.options.username !== undefined) {
      this.token = await this.signIn();
      answer = await send();
    }
    return answer;
  }
}

/** The package signed with `key` and packed, from a copy of `dir`; its registry. */
async function build(dir: string, key: KeyObject) {
  const registry = await validated(dir);
  const copy = await mkdtemp(join(tmpdir(), "svc-plugin-dev-"));
  try {
    await cp(dir, copy, {
      recursive: true,
      filter: (source) => basename(source) !== SIGNATURE_FILE,
    });
    const manifest = signManifest(
      { pluginId: registry.pluginId, version: registry.version, files: await hashDirectory(copy) },
      key,
    );
    await writeFile(join(copy, SIGNATURE_FILE), JSON.stringify(manifest));
    const { bytes } = await packDirectory(copy);
    return { registry, bytes };
  } finally {
    await rm(copy, { recursive: true, force: true });
  }
}

interface Routes {
  readonly routes?: Array<{ method?: string; path?: string; permission?: string }>;
}

/** Installs or updates the package, and activates it; what was done, or why not. */
async function deploy(session: Session, id: string, bytes: Buffer): Promise<{ ok: boolean; text: string }> {
  const found = await session.call("GET", "/api/plugins");
  if (found.status !== 200) return { ok: false, text: `listing the plugins failed: ${problemText(found)}` };
  const installed = (found.body as unknown as Array<{ pluginId: string }>).some((p) => p.pluginId === id);
  const sent = installed
    ? await session.call("POST", `/api/plugins/${id}/update?allowDowngrade=true`, bytes, "application/gzip")
    : await session.call("POST", "/api/plugins/install", bytes, "application/gzip");
  if (sent.status !== 200 && sent.status !== 201) {
    const hint =
      sent.body?.reason === "untrusted-signer"
        ? "\n  the stack does not trust this signer: `make dev` trusts the development signer (svc-plugin dev without --key); elsewhere add the key's public half to BackendHost__TrustedSigners__N__PublicKey"
        : "";
    return { ok: false, text: `${installed ? "update" : "install"} refused: ${problemText(sent)}${hint}` };
  }
  if (sent.body?.state !== "active") {
    const activated = await session.call("POST", `/api/plugins/${id}/activate`);
    if (activated.status !== 200) return { ok: false, text: `activation failed: ${problemText(activated)}` };
  }
  return { ok: true, text: `${installed ? "updated" : "installed"} ${id} ${String(sent.body?.version)}` };
}

/** Entitles the workspace's tenant and puts the plugin at the front of its chain, unless it is in it. */
async function joinChain(session: Session, id: string, workspace: string): Promise<string> {
  const path = `/api/workspaces/${encodeURIComponent(workspace)}/plugins`;
  const current = await session.call("GET", path);
  if (current.status !== 200) return `workspace ${workspace}'s chain not changed: ${problemText(current)}`;
  const chain = (current.body?.chain as Array<{ pluginId: string }>).map((p) => p.pluginId);
  const tenantKey = current.body?.tenantKey;
  const entitled = await session.call("PUT", "/api/entitlements", {
    items: [{ tenantKey, pluginId: id, entitled: true }],
  });
  if (entitled.status !== 200) return `not entitled in ${String(tenantKey)}: ${problemText(entitled)}`;
  if (chain.includes(id)) return `in workspace ${workspace}'s chain at position ${chain.indexOf(id) + 1}`;
  const assigned = await session.call("PUT", path, { chain: [id, ...chain] });
  if (assigned.status !== 200) return `workspace ${workspace}'s chain not changed: ${problemText(assigned)}`;
  return `put first in workspace ${workspace}'s chain (its primary: /surface/render uses its template)`;
}

/** Runs until the signal aborts. */
export async function runDev(options: DevOptions): Promise<void> {
  const { dir, print } = options;
  const key = options.key ?? createPrivateKey(DEV_SIGNER_PEM);
  const session = new Session(options);
  let first = true;

  const round = async () => {
    const started = performance.now();
    let built;
    try {
      built = await build(dir, key);
    } catch (error) {
      const where = (error as { path?: string }).path;
      print(`not sent: ${(error as Error).message}${where === undefined ? "" : ` (${where})`}`);
      return;
    }
    const id = built.registry.pluginId;
    const done = await deploy(session, id, built.bytes);
    const ms = Math.round(performance.now() - started);
    if (!done.ok) {
      print(done.text);
      return;
    }
    print(`${done.text}, active (${ms} ms)`);
    if (first) {
      first = false;
      if (options.workspace !== null) print(await joinChain(session, id, options.workspace));
      for (const r of (built.registry.raw as Routes).routes ?? []) {
        const url = new URL(`/api/plugins/${id}${r.path ?? ""}`, options.url);
        print(`  ${r.method ?? "GET"} ${url.href}${r.permission ? ` (key ${r.permission})` : ""}`);
      }
      print(`  surface: ${new URL("/surface/render", options.url).href} (the workspace its host serves)`);
      print(`watching ${dir} (Ctrl-C stops)`);
    }
  };

  // One round at a time; changes during a round make one more.
  let running: Promise<void> | undefined;
  let again = false;
  let timer: NodeJS.Timeout | undefined;
  const schedule = () => {
    if (running !== undefined) {
      again = true;
      return;
    }
    running = round()
      .catch((error: unknown) => print(`failed: ${(error as Error).message}`))
      .finally(() => {
        running = undefined;
        if (again) {
          again = false;
          schedule();
        }
      });
  };

  schedule();
  const watcher = watch(dir, { recursive: true, signal: options.signal }, (_event, name) => {
    // Editors' swap and backup files, and a signature written by `sign`, change nothing worth sending.
    const file = basename(String(name ?? ""));
    if (file === SIGNATURE_FILE || file.startsWith(".") || file.endsWith("~")) return;
    clearTimeout(timer);
    timer = setTimeout(schedule, 100);
  });
  await new Promise<void>((resolve) => {
    watcher.on("close", resolve);
    watcher.on("error", () => resolve());
    options.signal.addEventListener("abort", () => resolve(), { once: true });
  });
  clearTimeout(timer);
  await running;
}
