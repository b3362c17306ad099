/**
 * The example plugin (examples/plugins/hello) in the development stack: its signer trusted, and the
 * package installed through the API as the demo operator, so a newcomer sees a real plugin at once.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";

import { packDirectory } from "@svc/plugin-package";

import { DEMO, repoRoot } from "./stack.js";

export const EXAMPLE_PLUGIN_DIR = join(repoRoot, "examples", "plugins", "hello");
const DEV_SIGNER_PUBLIC_KEY = join(repoRoot, "examples", "plugins", "dev-signer.pub.pem");

/**
 * The settings that make the plugin registry trust the development signer, in addition to the signers
 * `env` already trusts: at the first index after theirs, so none is replaced.
 */
export function devSignerEnv(env: Readonly<Record<string, string | undefined>> = {}): Record<string, string> {
  const used = Object.keys(env)
    .map((name) => /^BackendHost__TrustedSigners__(\d+)__/.exec(name)?.[1])
    .filter((index): index is string => index !== undefined)
    .map(Number);
  const index = used.length === 0 ? 0 : Math.max(...used) + 1;
  return {
    [`BackendHost__TrustedSigners__${index}__PublisherId`]: "svc-dev",
    [`BackendHost__TrustedSigners__${index}__DisplayName`]: "svc development signer (examples/plugins)",
    [`BackendHost__TrustedSigners__${index}__PublicKey`]: readFileSync(DEV_SIGNER_PUBLIC_KEY, "utf8"),
  };
}

/** The example package as a .tgz, in memory. */
export async function examplePackage(): Promise<Buffer> {
  return (await packDirectory(EXAMPLE_PLUGIN_DIR)).bytes;
}

/**
 * Installs the example as the demo operator, activates it, entitles the demo tenant to it and adds it to
 * the end of workspace `default`'s chain when it is not in it (so its route answers and its keys reach the
 * workspace's admins; the plugins a developer put there stay, in their order); says what happened.
 */
export async function installExamplePlugin(base: string): Promise<string> {
  const login = await fetch(`${base}/api/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ username: DEMO.adminUserName, password: DEMO.adminPassword }),
  });
  if (!login.ok) throw new Error(`sign-in answered ${login.status}`);
  const { accessToken } = (await login.json()) as { accessToken: string };
  const auth = { authorization: `Bearer ${accessToken}` };
  const response = await fetch(`${base}/api/plugins/install`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/gzip" },
    body: await examplePackage(),
  });
  const body = (await response.json()) as { pluginId?: string; version?: string; detail?: string };
  if (!response.ok && response.status !== 409) {
    throw new Error(`install answered ${response.status}: ${body.detail ?? ""}`);
  }
  // Installed by an earlier start: brought up to the repository's copy (a changed file, a new UI entry),
  // keeping its state, chains and theme choices; an unchanged copy is left as it is.
  if (response.status === 409) {
    const updated = await fetch(`${base}/api/plugins/hello/update?allowDowngrade=true`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/gzip" },
      body: await examplePackage(),
    });
    if (!updated.ok) throw new Error(`update answered ${updated.status}: ${await updated.text()}`);
  }
  const activated = await fetch(`${base}/api/plugins/hello/activate`, { method: "POST", headers: auth });
  if (!activated.ok) throw new Error(`activation answered ${activated.status}: ${await activated.text()}`);
  const entitled = await fetch(`${base}/api/entitlements`, {
    method: "PUT",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ items: [{ tenantKey: DEMO.tenantKey, pluginId: "hello", entitled: true }] }),
  });
  if (!entitled.ok) throw new Error(`entitlement answered ${entitled.status}: ${await entitled.text()}`);
  const chainUrl = `${base}/api/workspaces/${DEMO.workspaceKey}/plugins`;
  const current = await fetch(chainUrl, { headers: auth });
  if (!current.ok) throw new Error(`the chain answered ${current.status}: ${await current.text()}`);
  const chain = ((await current.json()) as { chain: Array<{ pluginId: string }> }).chain.map(
    (p) => p.pluginId,
  );
  // The developer's chain is kept: the example joins it at the end when it is not in it, and nothing is
  // removed or reordered.
  const joined = !chain.includes("hello");
  if (joined) {
    const assigned = await fetch(chainUrl, {
      method: "PUT",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ chain: [...chain, "hello"] }),
    });
    if (!assigned.ok) throw new Error(`assignment answered ${assigned.status}: ${await assigned.text()}`);
  }
  const what =
    response.status === 409
      ? "hello (installed already, kept current)"
      : `${body.pluginId} ${body.version} installed`;
  const where = joined ? "added to workspace default's chain" : "in workspace default's chain already";
  return `${what}, active, ${where} (GET ${base}/api/plugins/hello/greeting)`;
}
