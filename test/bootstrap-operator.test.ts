/** The one-time bootstrap of the first platform operator, and signing in as it. */
import { execFile } from "node:child_process";
import { promisify } from "node:util";

import { gatewayService } from "@svc/service-gateway";
import { rbacService } from "@svc/service-rbac";
import { decodeJwt } from "jose";
import { afterAll, describe, expect, it } from "vitest";

import { repoRoot } from "../scripts/lib/stack.js";
import { createHarness } from "./support/harness.js";
import { signIn } from "./support/http.js";

const run = promisify(execFile);
const h = await createHarness({ seed: false });
afterAll(() => h.stopAll());

const bootstrap = (username: string) =>
  run(process.execPath, ["--import", "tsx", "scripts/bootstrap-operator.ts", "--username", username], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH ?? "", ...h.env },
  });

describe("bootstrap-operator", () => {
  it("creates the first operator once, with a password shown once, and refuses a second time", async () => {
    const { stdout } = await bootstrap("root-op");
    const password = /Password \(shown once[^)]*\): (\S+)/.exec(stdout)?.[1];
    expect(password).toBeDefined();
    await expect(bootstrap("second-op")).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining("exists already"),
    });

    await h.start(rbacService);
    const base = (await h.start(gatewayService)).hooks.httpAddress as string;
    const login = await signIn(base, { username: "root-op", password: password as string });
    expect(login.status).toBe(200);
    expect(decodeJwt(login.json<{ accessToken: string }>().accessToken)).toMatchObject({
      svc_scope: "platform",
      role: ["superadmin"],
    });
  }, 30_000);
});
