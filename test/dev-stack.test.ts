/**
 * The README's first command on a machine with no PostgreSQL: `make dev` (scripts/dev.ts)
 * against ports where nothing listens starts its own NATS and an embedded PostgreSQL, serves the resolve
 * route, and stops cleanly; reusing the embedded data folder with another password says what to do.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { connect } from "@nats-io/transport-node";
import { isNatsAuthError } from "@svc/bus";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";

import { freePort, repoRoot } from "../scripts/lib/stack.js";
import { bearerApi, http, signIn } from "./support/http.js";

// Readable by others: as root, the embedded server runs as user postgres, which must reach the folder.
const stateDir = mkdtempSync(join(tmpdir(), "svc-dev-test-"));
chmodSync(stateDir, 0o755);
const running = new Set<ChildProcess>();

/** Drops a database the secure run made on the shared server. */
async function dropDatabase(name: string): Promise<void> {
  const client = new pg.Client({ connectionString: "postgres://postgres@127.0.0.1:5432/postgres" });
  await client.connect();
  await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await client.end();
}

afterAll(() => {
  for (const child of running) child.kill("SIGKILL");
  rmSync(stateDir, { recursive: true, force: true });
});

function startDev(env: Record<string, string>) {
  const child = spawn(process.execPath, ["--import", "tsx", join("scripts", "dev.ts")], {
    cwd: repoRoot,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "/root",
      SVC_DEV_DIR: stateDir,
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);
  let output = "";
  child.stdout?.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr?.on("data", (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((resolve) =>
    child.once("exit", (code) => {
      running.delete(child);
      resolve(code);
    }),
  );
  const waitForOutput = async (pattern: RegExp, timeoutMs: number) => {
    const end = Date.now() + timeoutMs;
    while (!pattern.test(output)) {
      if (Date.now() > end || child.exitCode !== null) {
        throw new Error(`dev stack did not print ${pattern}:\n${output.slice(-4_000)}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  return { child, exited, output: () => output, waitForOutput };
}

describe("make dev on a machine with no PostgreSQL", () => {
  // Each start is from an empty data folder, so initdb runs and the first connection
  // meets a server that has only just opened its port (it answered 57P03 and make dev stopped, 2 runs in 4).
  // DEV_STARTS=5 npx vitest run test/dev-stack.test.ts starts it five times.
  const starts = Number(process.env.DEV_STARTS ?? 2);
  it(
    `starts NATS and an embedded PostgreSQL from an empty data folder on unused ports, ${starts} times in a row, serves the resolve route, stops on Ctrl-C`,
    async () => {
      for (let run = 1; run < starts; run++) {
        const ports = [await freePort(), await freePort(), await freePort()];
        const fresh = startDev({
          SVC_DEV_DIR: join(stateDir, `start-${run}`),
          DATABASE_URL: `postgres://postgres@127.0.0.1:${ports[0]}/svc`,
          NATS_URL: `nats://127.0.0.1:${ports[1]}`,
          GATEWAY_PORT: String(ports[2]),
          LOG_LEVEL: "warn",
        });
        await fresh.waitForOutput(/\[dev\] ready:/, 150_000);
        expect(fresh.output(), `start ${run}`).toContain("initialising an embedded cluster");
        const answer = await http(`http://127.0.0.1:${ports[2]}/workspace/public/resolve`, {
          headers: { host: "localhost" },
        });
        expect(answer.json(), `start ${run}`).toEqual({ resolved: true, workspaceKey: "default" });
        fresh.child.kill("SIGINT");
        expect(await fresh.exited, `start ${run}`).toBe(0);
        rmSync(join(stateDir, `start-${run}`), { recursive: true, force: true });
      }

      const [pgPort, natsPort, gatewayPort] = [await freePort(), await freePort(), await freePort()];
      // The default-shaped URL: no password.
      const dev = startDev({
        DATABASE_URL: `postgres://postgres@127.0.0.1:${pgPort}/svc`,
        NATS_URL: `nats://127.0.0.1:${natsPort}`,
        GATEWAY_PORT: String(gatewayPort),
        LOG_LEVEL: "warn",
      });
      await dev.waitForOutput(/\[dev\] ready:/, 150_000);
      expect(dev.output()).toContain(`starting an embedded server on port ${pgPort}`);
      expect(dev.output()).toContain("initialising an embedded cluster");
      const resolved = await http(`http://127.0.0.1:${gatewayPort}/workspace/public/resolve`, {
        headers: { host: "localhost" },
      });
      expect(resolved.json()).toEqual({ resolved: true, workspaceKey: "default" });
      const gateway = `http://127.0.0.1:${gatewayPort}`;
      const login = await signIn(gateway, { username: "admin", password: "admin-dev-password" });
      expect(login.status).toBe(200);
      // The example plugin is installed, active and in workspace default's chain.
      await dev.waitForOutput(
        /example plugin {2}hello 1\.0\.0 installed, active, added to workspace default's chain/,
        30_000,
      );
      const { accessToken } = login.json<{ accessToken: string }>();
      const api = bearerApi(() => gateway);
      const plugins = await api("GET", "/api/plugins", accessToken);
      expect(plugins.json<Array<{ pluginId: string; signed: boolean }>>()).toEqual([
        expect.objectContaining({ pluginId: "hello", signed: true, state: "active" }),
      ]);
      const greeting = await api("GET", "/api/plugins/hello/greeting?name=dev", accessToken);
      expect(greeting.json()).toMatchObject({ greeting: "Hello, dev!" });
      dev.child.kill("SIGINT");
      expect(await dev.exited).toBe(0);
      expect(dev.output()).toContain("[dev] stopped");

      // The same data folder with a password in DATABASE_URL: a message that says what to do.
      const again = startDev({
        DATABASE_URL: `postgres://postgres:other-secret@127.0.0.1:${pgPort}/svc`,
        NATS_URL: `nats://127.0.0.1:${natsPort}`,
        GATEWAY_PORT: String(gatewayPort),
        LOG_LEVEL: "warn",
      });
      expect(await again.exited).toBe(1);
      expect(again.output()).toMatch(
        /embedded PostgreSQL: the data folder .* was initialised .* no password/,
      );
      expect(again.output()).toMatch(/Use the DATABASE_URL it was created with, or delete/);
      expect(again.output()).not.toContain("other-secret");
    },
    120_000 * starts,
  );

  it.runIf(process.getuid?.() === 0)(
    "as root, a data folder the postgres user cannot reach fails with a message that says what to do",
    async () => {
      const closed = mkdtempSync(join(tmpdir(), "svc-dev-closed-"));
      chmodSync(closed, 0o700);
      try {
        const dev = startDev({
          SVC_DEV_DIR: join(closed, "state"),
          DATABASE_URL: `postgres://postgres@127.0.0.1:${await freePort()}/svc`,
          NATS_URL: `nats://127.0.0.1:${await freePort()}`,
          GATEWAY_PORT: String(await freePort()),
        });
        expect(await dev.exited).toBe(1);
        expect(dev.output()).toMatch(/embedded PostgreSQL: .*cannot enter .*Set SVC_DEV_DIR/);
      } finally {
        rmSync(closed, { recursive: true, force: true });
      }
    },
    60_000,
  );
});

/**
 * `make dev SECURE=1` runs the local bus in the production shape: a nats-server of its
 * own with the authorization `make nats-auth` writes and TLS (a CA of its own), each service on its own
 * user. The stack works (sign-in, the example plugin answering); a client with no credentials is refused
 * by that server, and one without TLS too.
 */
describe("make dev SECURE=1", () => {
  it("runs every service on its own NATS user; an anonymous client is refused; an operator's signer does not replace the development one", async () => {
    const database = `svc_dev_secure_${process.pid}`;
    // A signer of the operator's own at index 0: the example plugin still installs.
    const operatorSigner = generateKeyPairSync("ec", { namedCurve: "P-256" })
      .publicKey.export({ type: "spki", format: "pem" })
      .toString();
    const gatewayPort = await freePort();
    const dev = startDev({
      SECURE: "1",
      SVC_DEV_DIR: join(stateDir, "secure"),
      DATABASE_URL: `postgres://postgres@127.0.0.1:5432/${database}`,
      GATEWAY_PORT: String(gatewayPort),
      SVC_SUBJECT_PREFIX: `sec${process.pid}`,
      SVC_EVENTS_STREAM: `SEC${process.pid}_EVENTS`,
      LOG_LEVEL: "warn",
      BackendHost__TrustedSigners__0__PublisherId: "operator-signer",
      BackendHost__TrustedSigners__0__PublicKey: operatorSigner,
    });
    try {
      await dev.waitForOutput(/\[dev\] ready:/, 150_000);
      const port = Number(/NATS \(SECURE=1\): starting .* on 127\.0\.0\.1:(\d+)/.exec(dev.output())?.[1]);
      expect(port).toBeGreaterThan(0);
      await dev.waitForOutput(
        /example plugin {2}hello 1\.0\.0 installed, active, added to workspace default's chain/,
        30_000,
      );
      const gateway = `http://127.0.0.1:${gatewayPort}`;
      const login = await signIn(gateway, { username: "admin", password: "admin-dev-password" });
      expect(login.status, login.text).toBe(200);
      const { accessToken } = login.json<{ accessToken: string }>();
      const greeting = await bearerApi(() => gateway)(
        "GET",
        "/api/plugins/hello/greeting?name=dev",
        accessToken,
      );
      expect(greeting.json()).toMatchObject({ greeting: "Hello, dev!" });
      const ca = join(stateDir, "secure", "nats-auth", "tls", "ca.pem");
      const attempt = (tls: boolean) =>
        connect({
          servers: `nats://127.0.0.1:${port}`,
          reconnect: false,
          ...(tls ? { tls: { caFile: ca } } : {}),
        }).then(
          async (nc) => {
            await nc.close();
            return "connected";
          },
          (error: unknown) => (isNatsAuthError(error) ? "refused" : String(error)),
        );
      // Over TLS without credentials: refused; without TLS: not even that far.
      expect(await attempt(true)).toBe("refused");
      expect(await attempt(false)).not.toBe("connected");
    } finally {
      dev.child.kill("SIGINT");
      expect(await dev.exited).toBe(0);
      await dropDatabase(database);
    }
  }, 200_000);
});
