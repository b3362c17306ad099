/**
 * The admin console at /admin/, in headless Chromium against the real stack. Its first load is
 * measured on the built files (gzip, the budget is 150 KB); journeys sign in, create a tenant, a workspace
 * and a user, upload and activate the example plugin with the file picker, subscribe a webhook (its secret
 * shown once) and see the delivery the new user caused, see the jobs, and sign in as a workspace admin who
 * sees only what that session's keys allow. axe finds no serious or critical violation on any page; each
 * page's screenshot is written to test-results/admin-console/ (docs/operator-guide.md, "The admin console").
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";

import AxeBuilder from "@axe-core/playwright";
import { gatewayService } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { pluginRegistryService } from "@svc/service-plugin-registry";
import { rbacService } from "@svc/service-rbac";
import { resolverService } from "@svc/service-resolver";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { decodeJwt } from "jose";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { examplePackage } from "../scripts/lib/example-plugin.js";
import { DEMO, repoRoot, seedDemo } from "../scripts/lib/stack.js";
import { codePlugin, fixtureSigner, pluginStackEnv } from "./plugins/runtime-fixtures.js";
import { createHarness } from "./support/harness.js";
import { bearerApi, signIn } from "./support/http.js";
import { Receiver } from "./support/receiver.js";

const ASSETS = join(repoRoot, "services/gateway/static/admin/assets");
const SHOTS = join(repoRoot, "test-results/admin-console");
const CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));

describe("the admin console's first load", () => {
  it("is the page, one script and one stylesheet, under 150 KB compressed, with nothing inline", () => {
    const html = readFileSync(join(repoRoot, "services/gateway/static/admin/index.html"), "utf8");
    expect(html).toContain('<script type="module" src="/admin/assets/app.js"></script>');
    expect(html).toContain('<link rel="stylesheet" href="/admin/assets/app.css" />');
    // The gateway's CSP allows no inline script or style.
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/<style|\sstyle=/);
    const sizes = ["app.js", "app.css"].map((file) => gzipSync(readFileSync(join(ASSETS, file))).length);
    const total = sizes.reduce((a, b) => a + b, 0);
    console.log(
      `admin console first load: ${(total / 1024).toFixed(1)} KB compressed (js ${sizes[0]} B, css ${sizes[1]} B)`,
    );
    expect(total).toBeLessThan(150 * 1024);
  });
});

describe.runIf(CHROMIUM !== undefined || process.env.CI === "true")("the admin console in Chromium", () => {
  const work = mkdtempSync(join(tmpdir(), "svc-admin-"));
  const receiver = new Receiver();
  const signer = fixtureSigner();
  let h: Awaited<ReturnType<typeof createHarness>>;
  let browser: Browser;
  let base: string;
  let jobReaper: Awaited<ReturnType<typeof h.start>>;
  let env: Record<string, string>;
  const problems: string[] = [];

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    await receiver.start();
    h = await createHarness();
    await seedDemo(h.db.url, { withAdmin: true });
    env = {
      ...pluginStackEnv(work, { dev: true, tests: signer }),
      BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
      BackendHost__RateLimitAuthPerMinute: "0",
      BackendHost__RateLimitAuthPerAccountPerMinute: "0",
    };
    await h.start(rbacService, env);
    await h.start(resolverService, env);
    await h.start(pluginRegistryService, env);
    await h.start(webhookDispatcherService, env);
    jobReaper = await h.start(jobReaperService, env);
    base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
    browser = await chromium.launch({
      ...(CHROMIUM === undefined ? {} : { executablePath: CHROMIUM }),
      args: ["--no-sandbox"],
    });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await h?.stopAll();
    await receiver.stop();
    rmSync(work, { recursive: true, force: true });
  });

  async function open(): Promise<Page> {
    // A context of its own (axe needs one): no state shared between journeys.
    const page = await (await browser.newContext()).newPage();
    // A CSP refusal or a script error shows in the console: none may happen.
    page.on("console", (m) => {
      if (
        m.type() === "error" &&
        // The API's refusals (4xx) and a stopped service's 503 are the console's to show, not faults.
        !/Failed to load resource: the server responded with a status of (4\d\d|503)/.test(m.text())
      ) {
        problems.push(m.text());
      }
    });
    page.on("pageerror", (e) => problems.push(e.message));
    await page.goto(`${base}/admin/`);
    return page;
  }

  async function signInAs(
    page: Page,
    user: string,
    password: string,
    workspaceKey = "",
    landing = "Overview",
  ) {
    await page.getByLabel("User name").fill(user);
    await page.getByLabel("Password").fill(password);
    await page.getByLabel("Workspace (empty: the platform)").fill(workspaceKey);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: landing }).waitFor();
  }

  /** No serious or critical axe violation, and a screenshot for the operator guide. */
  async function check(page: Page, name: string) {
    // axe.run in the page itself: the console has no frame, and the default (each frame's partial results
    // finished in a new blank page) took twice as long for the same findings.
    const { violations } = await new AxeBuilder({ page }).setLegacyMode().analyze();
    const grave = violations.filter((v) => v.impact === "serious" || v.impact === "critical");
    expect(
      grave.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(" ")).join(", ")})`),
      name,
    ).toEqual([]);
    await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  }

  const area = (page: Page, label: string) =>
    page.getByRole("navigation", { name: "Areas" }).getByRole("link", { name: label });

  it("signs the operator in and out (the session revoked on the platform), and refuses a wrong password plainly", async () => {
    const page = await open();
    await check(page, "sign-in");
    await page.getByLabel("User name").fill(DEMO.adminUserName);
    await page.getByLabel("Password").fill("not the password");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect.poll(() => page.getByRole("alert").textContent()).toMatch(/\S/);
    const answered = page.waitForResponse((r) => r.url().endsWith("/api/auth/login") && r.status() === 200);
    await signInAs(page, DEMO.adminUserName, DEMO.adminPassword);
    const token = ((await (await answered).json()) as { accessToken: string }).accessToken;
    expect(await page.getByText(`Signed in as ${DEMO.adminUserName}`).count()).toBe(1);
    await check(page, "overview");
    const api = bearerApi(() => base);
    expect((await api("GET", "/api/users", token)).status).toBe(200);
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByText("You signed out.").waitFor();
    // Signing out ended the session on the platform: the token is refused from now on.
    await expect.poll(async () => (await api("GET", "/api/users", token)).status).toBe(401);
    expect((await api("POST", "/api/auth/logout", token)).status).toBe(401);
    expect((await api("POST", "/api/auth/logout", null)).status).toBe(401);
    await page.context().close();
  });

  it("creates a tenant, a workspace and a user; uploads and activates a plugin; subscribes a webhook and sees its delivery; lists jobs", async () => {
    const page = await open();
    await signInAs(page, DEMO.adminUserName, DEMO.adminPassword);

    await area(page, "Tenants and workspaces").click();
    const tenantForm = page.getByRole("form", { name: "New tenant" });
    await tenantForm.getByLabel("Tenant key").fill("journey");
    await tenantForm.getByLabel("Name").fill("Journey Ltd");
    await tenantForm.getByRole("button", { name: "Create tenant" }).click();
    await page.getByRole("cell", { name: "Journey Ltd" }).waitFor();
    const wsForm = page.getByRole("form", { name: "New workspace" });
    await wsForm.getByLabel("Workspace key").fill("ws-journey");
    await wsForm.getByLabel("Tenant key").fill("journey");
    await wsForm.getByLabel("Name").fill("Journey shop");
    await wsForm.getByLabel("Host (optional)").fill("journey.example");
    await wsForm.getByRole("button", { name: "Create workspace" }).click();
    await page.getByRole("cell", { name: "journey.example" }).waitFor();
    // A refusal is shown with the API's reason, not a blank page.
    await tenantForm.getByLabel("Tenant key").fill("journey");
    await tenantForm.getByLabel("Name").fill("Again");
    await tenantForm.getByRole("button", { name: "Create tenant" }).click();
    await expect.poll(() => page.getByRole("alert").first().textContent()).toMatch(/journey/i);
    await check(page, "tenants");

    await area(page, "Plugins").click();
    await page.getByLabel(/Install a package/).setInputFiles({
      name: "hello-1.0.0.tgz",
      mimeType: "application/gzip",
      buffer: await examplePackage(),
    });
    await page.getByText("Installed hello 1.0.0").waitFor({ timeout: 20_000 });
    await page.getByRole("button", { name: "Activate hello" }).click();
    await page.getByRole("button", { name: "Deactivate hello" }).waitFor({ timeout: 20_000 });
    expect(await page.getByRole("cell", { name: "active", exact: true }).count()).toBe(1);
    // The page's audit follows what was just done on it.
    await page
      .getByRole("table", { name: "Audit, newest first" })
      .getByRole("row", { name: /admin activate hello 1\.0\.0 succeeded/ })
      .waitFor();
    await check(page, "plugins");

    // The plugin's own admin page (its ui/admin.js, surface "admin") joins the console while it is active.
    await area(page, "hello").click();
    await page.getByRole("heading", { name: "Plugin hello" }).waitFor();
    await page.getByText("Greetings given by this worker: 0").waitFor();
    await page.getByRole("button", { name: "Greet the operator" }).click();
    await page.getByText(`Hello, ${DEMO.adminUserName}!`).waitFor();
    await page.getByText("Greetings given by this worker: 1").waitFor();
    await check(page, "plugin-page");

    await area(page, "Webhooks").click();
    const subForm = page.getByRole("form", { name: "New subscription" });
    await subForm.getByLabel("Event (or *)").fill("user.created");
    await subForm.getByLabel("Target URL").fill(receiver.url);
    await subForm.getByRole("button", { name: "Create subscription" }).click();
    const secret = await page.locator("code.secret").textContent();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);

    await area(page, "Users").click();
    const userForm = page.getByRole("form", { name: "New user" });
    await userForm.getByLabel("User name").fill("journey-user");
    await userForm.getByLabel("Password").fill("a long journey password");
    await userForm.getByRole("button", { name: "Create user" }).click();
    await page.getByRole("cell", { name: "journey-user", exact: true }).waitFor();
    await check(page, "users");

    // The new user's event reaches the receiver, and the console shows the delivery and its attempts.
    await receiver.waitFor(1, 30_000);
    await area(page, "Webhooks").click();
    await page.getByRole("button", { name: `Deliveries of user.created to ${receiver.url}` }).click();
    await expect
      .poll(
        async () => {
          await page.getByRole("button", { name: "Refresh deliveries" }).click();
          return page.getByRole("cell", { name: "delivered", exact: true }).count();
        },
        { timeout: 15_000 },
      )
      .toBe(1);
    await page.getByText(/Circuit to http:\/\/127\.0\.0\.1:\d+: closed, 0 failures in a row/).waitFor();
    // The delivery's attempts: when, how long, the answer.
    await page
      .getByRole("button", { name: /^Attempts of / })
      .first()
      .click();
    const attempts = page.getByRole("table", { name: /^Attempts of delivery/ });
    await attempts.getByRole("cell", { name: "delivered", exact: true }).waitFor();
    expect(await attempts.getByRole("cell", { name: /^\d+ ms$/ }).count()).toBe(1);
    expect(await attempts.getByRole("cell", { name: "200", exact: true }).count()).toBe(1);
    await check(page, "webhooks");

    // A dead letter (made here by hand: a job that failed for good) is listed with its error, and retried
    // from the page.
    const [dead] = await h.sql<{ id: string }>(`
      INSERT INTO job_reaper.jobs (type, status, attempts, max_attempts, completed_at, last_error, announced_at)
      VALUES ('journey.dead', 'Failed', 5, 5, now(), 'the receiver answered 500', now()) RETURNING id::text AS id`);
    await area(page, "Jobs").click();
    await page.getByRole("table", { name: "Jobs, newest first" }).waitFor();
    await page.getByLabel("Status").selectOption("Succeeded");
    await page.getByRole("button", { name: "Filter" }).click();
    await expect
      .poll(() => page.getByRole("cell", { name: "Succeeded", exact: true }).count())
      .toBeGreaterThan(0);
    await page.getByLabel("Status").selectOption("Failed");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.getByRole("cell", { name: "the receiver answered 500" }).waitFor();
    await check(page, "jobs");
    await page.getByRole("button", { name: `Retry job ${dead?.id}` }).click();
    // Retried, it is a dead letter no more: the Failed list no longer holds it.
    await expect.poll(() => page.getByRole("cell", { name: "the receiver answered 500" }).count()).toBe(0);
    const [retried] = await h.sql<{ status: string }>(
      `SELECT status FROM job_reaper.jobs WHERE id = ${Number(dead?.id)}`,
    );
    expect(retried?.status).toBe("Pending");
    // Waiting again (no worker takes its type): made due now, then cancelled, both from the page.
    await page.getByLabel("Status").selectOption("Pending");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.getByRole("button", { name: `Run job ${dead?.id} now` }).click();
    await page.getByRole("button", { name: `Cancel job ${dead?.id}` }).click();
    await expect.poll(() => page.getByRole("button", { name: `Cancel job ${dead?.id}` }).count()).toBe(0);
    const [cancelled] = await h.sql<{ status: string; last_error: string }>(
      `SELECT status, last_error FROM job_reaper.jobs WHERE id = ${Number(dead?.id)}`,
    );
    expect(cancelled).toEqual({ status: "Failed", last_error: `Cancelled by ${DEMO.adminUserName}.` });
    await page.context().close();
    expect(problems).toEqual([]);
  }, 120_000);

  it("shows the plugins' trust and audit, orders a workspace's chain, grants and withdraws a plugin, adds and removes a member, exports a user's data, saves a role, runs the recorder", async () => {
    const api = bearerApi(() => base);
    const token = (await signIn(base, { username: DEMO.adminUserName, password: DEMO.adminPassword })).json<{
      accessToken: string;
    }>().accessToken;
    // hello is active from the journey above; the demo tenant is entitled to it here.
    const granted = await api("PUT", "/api/entitlements", token, {
      items: [{ tenantKey: DEMO.tenantKey, pluginId: "hello", entitled: true }],
    });
    expect(granted.status, granted.text).toBe(200);
    const page = await open();
    await signInAs(page, DEMO.adminUserName, DEMO.adminPassword);

    await area(page, "Plugins").click();
    const report = page.getByRole("table", { name: /Signature report/ });
    await report.getByRole("cell", { name: "valid", exact: true }).waitFor();
    const audit = page.getByRole("table", { name: "Audit, newest first" });
    await audit.getByRole("row", { name: /admin activate hello 1\.0\.0 succeeded/ }).waitFor();
    await page
      .getByRole("table", { name: "Trusted signers" })
      .getByRole("cell", { name: "svc-dev" })
      .waitFor();

    await area(page, "Plugin chains").click();
    await page.getByLabel("Workspace").selectOption(DEMO.workspaceKey);
    await page.getByRole("button", { name: "Add to the end of the chain" }).click();
    await page.getByRole("cell", { name: "hello", exact: true }).waitFor();
    const chain = async () =>
      (await api("GET", `/api/workspaces/${DEMO.workspaceKey}/plugins`, token))
        .json<{ chain: Array<{ pluginId: string }> }>()
        .chain.map((p) => p.pluginId);
    expect(await chain()).toEqual(["hello"]);
    await check(page, "chains");
    await page.getByRole("button", { name: "Remove hello" }).click();
    await page.getByText("The chain is empty.").waitFor();
    expect(await chain()).toEqual([]);

    await area(page, "Roles").click();
    const roleForm = page.getByRole("form", { name: "Role" });
    await roleForm.getByLabel("Role name").fill("journey-auditor");
    await roleForm.getByLabel("Keys (choose several)").selectOption(["job.read", "webhook.read"]);
    await roleForm.getByRole("button", { name: "Save role" }).click();
    await page.getByRole("row", { name: /journey-auditor workspace job\.read, webhook\.read/ }).waitFor();
    await check(page, "roles");

    await area(page, "Entitlements").click();
    const grants = page.getByRole("table", { name: "Grants" });
    await grants.getByRole("row", { name: new RegExp(`hello tenant ${DEMO.tenantKey}`) }).waitFor();
    const grantForm = page.getByRole("form", { name: "Grant" });
    await grantForm.getByLabel("Plugin").fill("hello");
    await grantForm.getByLabel("To a").selectOption("workspace");
    await grantForm.getByLabel("Tenant or workspace key").fill("ws-journey");
    await grantForm.getByRole("button", { name: "Grant" }).click();
    await grants.getByRole("row", { name: /hello workspace ws-journey/ }).waitFor();
    await check(page, "entitlements");
    await page.getByRole("button", { name: "Withdraw hello from ws-journey" }).click();
    await expect.poll(() => grants.getByRole("row", { name: /hello workspace ws-journey/ }).count()).toBe(0);

    // Members: the user made in the journey joins workspace default with a role, then leaves it.
    const users = (await api("GET", "/api/users?limit=100", token)).json<{
      items: Array<{ id: string; userName: string }>;
    }>();
    const journeyUser = users.items.find((u) => u.userName === "journey-user");
    expect(journeyUser).toBeDefined();
    await area(page, "Members").click();
    await page.getByLabel("Workspace").selectOption(DEMO.workspaceKey);
    const memberForm = page.getByRole("form", { name: "Member" });
    await memberForm.getByLabel("User id").fill(journeyUser?.id ?? "");
    await memberForm.getByLabel("Roles here (comma-separated)").fill("admin");
    await memberForm.getByRole("button", { name: "Save member" }).click();
    await page
      .getByRole("row", { name: /^journey-user\b.*\badmin\b/ })
      .waitFor({ timeout: 10_000 })
      .catch(async (e: unknown) => {
        throw new Error(`${(e as Error).message}\n${(await page.getByRole("main").textContent()) ?? ""}`);
      });
    await check(page, "members");
    await page.getByRole("button", { name: "Remove journey-user" }).click();
    await expect.poll(() => page.getByRole("row", { name: /journey-user/ }).count()).toBe(0);

    // A user's data export is offered as a file.
    await area(page, "Users").click();
    const [file] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("button", { name: `Export ${DEMO.adminUserName}'s data` }).click(),
    ]);
    expect(file.suggestedFilename()).toBe(`${DEMO.adminUserName}-data-export.json`);
    const exported = JSON.parse(readFileSync(await file.path(), "utf8")) as {
      user: { userName: string };
      memberships: Array<{ workspaceKey: string }>;
    };
    expect(exported.user.userName).toBe(DEMO.adminUserName);
    expect(exported.memberships.map((m) => m.workspaceKey)).toContain(DEMO.workspaceKey);

    // A subscription paused and resumed, its secret rotated (the new one shown once).
    await area(page, "Webhooks").click();
    const sub = `user.created to ${receiver.url}`;
    await page.getByRole("button", { name: `Pause ${sub}` }).click();
    await page.getByRole("cell", { name: "paused", exact: true }).waitFor();
    await page.getByRole("button", { name: `Resume ${sub}` }).click();
    await page.getByRole("button", { name: `Pause ${sub}` }).waitFor();
    await page.getByRole("button", { name: `Rotate the secret of ${sub}` }).click();
    await expect.poll(() => page.locator("code.secret").textContent()).toMatch(/^whsec_/);

    await area(page, "Flows").click();
    await page.getByRole("heading", { name: "Flows" }).waitFor();
    await check(page, "flows");
    await area(page, "Notifications").click();
    await page.getByLabel("Unread only").uncheck();
    await page.getByRole("heading", { name: "Notifications" }).waitFor();
    await check(page, "notifications");
    await area(page, "Configuration").click();
    await page.getByRole("cell", { name: "BackendHost__RequestTimeoutMs", exact: true }).waitFor();
    await check(page, "configuration");

    await area(page, "Diagnostics").click();
    await page.getByText("Nothing has been recorded.").waitFor();
    await page.getByRole("button", { name: "Start recording" }).click();
    await page.getByText(/Recording [\w-]+: recording/).waitFor();
    await page.getByRole("button", { name: "Stop recording" }).click();
    await page.getByText(/Recording [\w-]+: stopped, \d+ entries/).waitFor();
    await check(page, "diagnostics");
    await page.context().close();
    expect(problems).toEqual([]);
  }, 60_000);

  it("drops a second plugin on the page, orders a chain of two, delegates, themes a workspace, edits custom fields, surfaces, snippets, flows, settings, media, integrations and a workspace's hosts", async () => {
    const api = bearerApi(() => base);
    const token = (await signIn(base, { username: DEMO.adminUserName, password: DEMO.adminPassword })).json<{
      accessToken: string;
    }>().accessToken;
    const page = await open();
    await signInAs(page, DEMO.adminUserName, DEMO.adminPassword);

    // A second plugin, dropped on the page (drag-and-drop): it defines custom fields on workspaces.
    const crm = await codePlugin(
      work,
      signer,
      "crm",
      "export class Plugin { ping() { return { pong: true }; } }",
      [{ method: "GET", path: "/ping", handler: "ping" }],
      {
        customFields: [
          {
            entityName: "workspace",
            key: "tier",
            label: "Tier",
            type: "select",
            options: ["gold", "silver"],
          },
          { entityName: "workspace", key: "vip", label: "VIP", type: "boolean" },
        ],
      },
    );
    await area(page, "Plugins").click();
    const dropped = await page.evaluateHandle(
      ({ bytes, name }) => {
        // Runs in the page (the tests are compiled without the DOM's types).
        const page = globalThis as unknown as {
          DataTransfer: new () => { items: { add(file: unknown): void } };
        };
        const transfer = new page.DataTransfer();
        transfer.items.add(new File([new Uint8Array(bytes)], name, { type: "application/gzip" }));
        return transfer;
      },
      { bytes: [...crm], name: "crm-1.0.0.tgz" },
    );
    await page.dispatchEvent(".drop", "dragover", { dataTransfer: dropped });
    await page.dispatchEvent(".drop", "drop", { dataTransfer: dropped });
    await page.getByText("Installed crm 1.0.0 (signed by tests)").waitFor({ timeout: 20_000 });
    await page.getByRole("button", { name: "Activate crm" }).click();
    await page.getByRole("button", { name: "Deactivate crm" }).waitFor({ timeout: 20_000 });
    // The feed is not configured here: its refusal is shown plainly.
    const feed = page.getByRole("form", { name: "Install from the feed" });
    await feed.getByLabel("Package id").fill("nowhere");
    await feed.getByLabel("Version").fill("1.0.0");
    await feed.getByRole("button", { name: "Install from the feed" }).click();
    await expect.poll(() => page.getByRole("alert").count()).toBe(1);

    // A chain of two, reordered: crm moved ahead of hello.
    expect(
      (
        await api("PUT", "/api/entitlements", token, {
          items: [{ tenantKey: DEMO.tenantKey, pluginId: "crm", entitled: true }],
        })
      ).status,
    ).toBe(200);
    await area(page, "Plugin chains").click();
    await page.getByLabel("Workspace").selectOption(DEMO.workspaceKey);
    const add = page.getByRole("form", { name: "Add a plugin to the chain" });
    await add.getByLabel("Plugin").selectOption("hello");
    await add.getByRole("button", { name: "Add to the end of the chain" }).click();
    await page.getByRole("cell", { name: "hello", exact: true }).waitFor();
    await add.getByLabel("Plugin").selectOption("crm");
    await add.getByRole("button", { name: "Add to the end of the chain" }).click();
    await page.getByRole("cell", { name: "crm", exact: true }).waitFor();
    const chain = async () =>
      (await api("GET", `/api/workspaces/${DEMO.workspaceKey}/plugins`, token))
        .json<{ chain: Array<{ pluginId: string }> }>()
        .chain.map((p) => p.pluginId);
    expect(await chain()).toEqual(["hello", "crm"]);
    await page.getByRole("button", { name: "Move crm up" }).click();
    await expect.poll(chain).toEqual(["crm", "hello"]);
    await page.getByRole("button", { name: "Move crm up" }).and(page.locator(":disabled")).waitFor();

    // Delegated to the demo tenant, then taken back.
    await area(page, "Entitlements").click();
    await page.getByRole("combobox", { name: /^Tenant/ }).selectOption(DEMO.tenantKey);
    const delegate = page.getByRole("form", { name: "Delegate" });
    await delegate.getByLabel("Plugin to delegate").fill("hello");
    await delegate.getByRole("button", { name: `Delegate to ${DEMO.tenantKey}` }).click();
    const delegated = page.getByRole("table", { name: `Plugins delegated to ${DEMO.tenantKey}` });
    await delegated.getByRole("row", { name: new RegExp(`^hello ${DEMO.adminUserName}|^hello `) }).waitFor();
    await check(page, "delegations");
    await page.getByRole("button", { name: `Take hello back from ${DEMO.tenantKey}` }).click();
    await page.getByText("Nothing is delegated to this tenant.").waitFor();

    // The workspace takes hello's theme, and one of its settings is changed.
    await area(page, "Themes").click();
    await page
      .getByRole("table", { name: "Template definitions" })
      .getByRole("row", { name: /index Hello page hello 1\.0\.0 workspace/ })
      .waitFor();
    await page.getByLabel("Workspace").selectOption(DEMO.workspaceKey);
    const choose = page.getByRole("form", { name: "Choose a theme" });
    await choose.getByLabel("Theme").selectOption("hello");
    await choose.getByRole("button", { name: "Use this theme" }).click();
    await page.getByText(`${DEMO.workspaceKey} uses the theme of hello 1.0.0.`).waitFor();
    const settings = page.getByRole("form", { name: "Theme settings" });
    await settings.getByLabel("Greeting").fill("Howdy");
    await settings.getByLabel(/^Layout/).selectOption("narrow");
    await settings.getByRole("button", { name: "Save settings" }).click();
    await page.getByText(`Settings of ${DEMO.workspaceKey} saved.`).waitFor();
    // The form shows what is stored now.
    await expect.poll(() => settings.getByLabel(/^Layout/).inputValue()).toBe("narrow");
    expect(await settings.getByLabel("Greeting").inputValue()).toBe("Howdy");
    const themed = (await api("GET", `/api/themes/workspaces/${DEMO.workspaceKey}/settings`, token)).json<{
      valuesByKey: Record<string, string>;
    }>();
    expect(themed.valuesByKey).toMatchObject({ greeting: "Howdy", layout: "narrow" });
    await check(page, "themes");

    // crm's custom fields on the workspace.
    await area(page, "Custom fields").click();
    await page.getByRole("cell", { name: "select: gold, silver" }).waitFor();
    const open_ = page.getByRole("form", { name: "Open an entity's fields" });
    await open_.getByLabel("Entity").selectOption("workspace");
    await open_.getByLabel(/^Id/).fill(DEMO.workspaceKey);
    await open_.getByRole("button", { name: "Open" }).click();
    const values = page.getByRole("form", { name: "Custom field values" });
    await values.getByLabel("Tier").selectOption("gold");
    await values.getByLabel("VIP").check();
    await values.getByRole("button", { name: "Save values" }).click();
    await page.getByText(`Values of workspace ${DEMO.workspaceKey} saved.`).waitFor();
    expect(
      (await api("GET", `/api/custom-fields/workspace/${DEMO.workspaceKey}`, token)).json<{
        values: Record<string, string>;
      }>().values,
    ).toEqual({ tier: "gold", vip: "true" });
    await check(page, "custom-fields");

    // A surface (its navigation tree) and a snippet.
    await area(page, "Surfaces and snippets").click();
    await page.getByLabel("Workspace").selectOption(DEMO.workspaceKey);
    const surface = page.getByRole("form", { name: "Surface" });
    await surface.getByLabel("Surface key").fill("journey");
    await surface.getByLabel("Name").fill("Journey navigation");
    await surface.getByRole("button", { name: "Save surface" }).click();
    await page.getByRole("cell", { name: "Journey navigation" }).waitFor();
    await page.getByRole("button", { name: "Edit surface journey" }).click();
    await surface.getByLabel("Name").fill("Journey navigation, edited");
    await surface.getByLabel(/^Navigation tree/).fill("{ not json");
    await surface.getByRole("button", { name: "Save surface" }).click();
    await page.getByText(/The navigation tree is not JSON/).waitFor();
    await surface
      .getByLabel(/^Navigation tree/)
      .fill(JSON.stringify({ key: "home", title: "Start", path: "", children: [] }));
    await surface.getByRole("button", { name: "Save surface" }).click();
    await page.getByRole("cell", { name: "Journey navigation, edited" }).waitFor();
    const snippet = page.getByRole("form", { name: "Snippet" });
    await snippet.getByLabel("Snippet key").fill("journey-footer");
    await snippet.getByLabel("Content", { exact: true }).fill("Made on the journey");
    await snippet.getByRole("button", { name: "Save snippet" }).click();
    await page.getByRole("cell", { name: "Made on the journey" }).waitFor();
    await check(page, "surfaces");
    await page.getByRole("button", { name: "Delete snippet journey-footer" }).click();
    await expect.poll(() => page.getByRole("cell", { name: "Made on the journey" }).count()).toBe(0);

    // A flow made with one action, then edited to two.
    await area(page, "Flows").click();
    const flow = page.getByRole("form", { name: "Flow" });
    await flow.getByLabel("Name", { exact: true }).fill("journey-flow");
    await flow.getByLabel(/^On event/).fill("user.created");
    await flow.getByLabel("Title").fill("A user joined");
    await flow.getByRole("button", { name: "Create flow" }).click();
    await page.getByRole("row", { name: /journey-flow user\.created all \(platform\) notify yes/ }).waitFor();
    await page.getByRole("button", { name: "Edit flow journey-flow" }).click();
    await flow.getByRole("button", { name: "Add an action" }).click();
    const second = flow.getByRole("group", { name: "Action 2" });
    await second.getByLabel("Type").selectOption("publish");
    // A flow may not publish a platform event: refused, and the API's reason shown.
    await second.getByLabel("Event to publish").fill("user.deleted");
    await flow.getByRole("button", { name: "Save flow" }).click();
    await page.getByText(/never the platform's \('user\.deleted'\)/).waitFor();
    await second.getByLabel("Event to publish").fill("flow.journey-noticed");
    await second.getByLabel(/^Data/).fill('{"by": "the console"}');
    await flow.getByRole("button", { name: "Save flow" }).click();
    await page.getByRole("row", { name: /journey-flow .* notify, publish yes/ }).waitFor();
    const flows = (await api("GET", "/api/flows", token)).json<{
      items: Array<{ name: string; actions: Array<Record<string, unknown>> }>;
    }>();
    expect(flows.items.find((f) => f.name === "journey-flow")?.actions).toEqual([
      { type: "notify", title: "A user joined", detail: null, permission: expect.any(String) },
      { type: "publish", eventName: "flow.journey-noticed", data: { by: "the console" } },
    ]);
    await check(page, "flow-editor");

    // A setting changed at run time makes sign-in refuse a second try at one account: the 429 is shown
    // on the sign-in page with its Retry-After; the setting is then given back.
    await area(page, "Configuration").click();
    const setting = page.getByRole("form", { name: "Change a setting" });
    await setting.getByLabel("Setting").selectOption("BackendHost__RateLimitAuthPerAccountPerMinute");
    await setting.getByLabel("New value").fill("1");
    await setting.getByRole("button", { name: "Store value" }).click();
    await page.getByText("BackendHost__RateLimitAuthPerAccountPerMinute is now 1.").waitFor();
    const limited = await open();
    await expect
      .poll(
        async () => {
          await limited.getByLabel("User name").fill("nobody-here");
          await limited.getByLabel("Password").fill("not a password at all");
          await limited.getByRole("button", { name: "Sign in" }).click();
          await limited.getByRole("alert").waitFor();
          return limited.getByRole("alert").textContent();
        },
        { timeout: 15_000 },
      )
      .toMatch(/^Too many requests\. Try again in \d+ s\.$/);
    await check(limited, "sign-in-429");
    await limited.context().close();
    await page.getByRole("button", { name: "Reset BackendHost__RateLimitAuthPerAccountPerMinute" }).click();
    await page.getByText("BackendHost__RateLimitAuthPerAccountPerMinute is back to its default.").waitFor();
    await check(page, "configuration-change");

    // Media: a file uploaded, downloaded byte for byte, deleted.
    await area(page, "Media").click();
    await page.getByLabel("Workspace").selectOption(DEMO.workspaceKey);
    const bytes = Buffer.from("a file the console uploaded\n");
    await page.getByLabel(`Upload a file to ${DEMO.workspaceKey}`).setInputFiles({
      name: "journey.txt",
      mimeType: "text/plain",
      buffer: bytes,
    });
    await page.getByText(/^Uploaded journey\.txt \(\d+ B\)\.$/).waitFor();
    const [saved] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("button", { name: "Download journey.txt" }).click(),
    ]);
    expect(saved.suggestedFilename()).toBe("journey.txt");
    expect(readFileSync(await saved.path())).toEqual(bytes);
    await check(page, "media");
    page.once("dialog", (d) => void d.accept());
    await page.getByRole("button", { name: "Delete journey.txt" }).click();
    await page.getByText("No files.").waitFor();

    // An integration: its client secret shown once.
    await area(page, "Integrations").click();
    const integration = page.getByRole("form", { name: "New integration" });
    await integration.getByLabel("Name").fill("journey-robot");
    await integration.getByLabel("Keys (choose several)").selectOption(["job.read"]);
    await integration.getByRole("button", { name: "Create integration" }).click();
    expect(await page.locator("code.secret").textContent()).toMatch(/^\S{20,}$/);
    const robot = (await api("GET", "/api/security/integrations", token))
      .json<Array<{ name: string; clientId: string; permissions: string[] }>>()
      .find((i) => i.name === "journey-robot");
    expect(robot?.permissions).toEqual(["job.read"]);
    await page.getByRole("cell", { name: robot?.clientId ?? "?" }).waitFor();
    await check(page, "integrations");
    page.once("dialog", (d) => void d.accept());
    await page.getByRole("button", { name: "Delete integration journey-robot" }).click();
    await page.getByText("No integrations.").waitFor();

    // A workspace's visibility and hosts edited, suspended and reactivated; a tenant claims a host.
    await area(page, "Tenants and workspaces").click();
    await page.getByRole("button", { name: "Edit ws-journey" }).click();
    const editor = page.getByRole("form", { name: "Edit workspace" });
    await editor.getByLabel("Visibility").selectOption("Authenticated");
    await editor.getByLabel(/^Hosts, one per line/).fill("journey.example\njourney.example/shop");
    await editor.getByRole("button", { name: "Save workspace" }).click();
    await page
      .getByRole("row", {
        name: /ws-journey journey Journey shop Authenticated active journey\.example, journey\.example\/shop/,
      })
      .waitFor();
    await page.getByRole("button", { name: "Suspend workspace ws-journey" }).click();
    await page.getByRole("button", { name: "Reactivate workspace ws-journey" }).waitFor();
    const suspended = (await api("GET", "/api/workspaces/ws-journey", token)).json<{ isActive: boolean }>();
    expect(suspended.isActive).toBe(false);
    await page.getByRole("button", { name: "Reactivate workspace ws-journey" }).click();
    await page.getByRole("button", { name: "Suspend workspace ws-journey" }).waitFor();
    // Opened again, the editor shows the workspace as it is now.
    await page.getByRole("button", { name: "Edit ws-journey" }).click();
    expect(await editor.getByLabel("Visibility").inputValue()).toBe("Authenticated");
    await editor.getByRole("button", { name: "Cancel" }).click();
    await page.getByRole("combobox", { name: /^Tenant/ }).selectOption("journey");
    const claim = page.getByRole("form", { name: "Claim a host" });
    await claim.getByLabel("Host to claim").fill("journey.example");
    await claim.getByRole("button", { name: "Claim host" }).click();
    await page
      .getByRole("table", { name: "Hosts of journey" })
      .getByRole("cell", { name: "journey.example", exact: true })
      .waitFor();
    await check(page, "tenants-edit");

    // A service down: the gateway's 503 is shown with its Retry-After, and the page works once it is back.
    await jobReaper.stop();
    try {
      await area(page, "Jobs").click();
      await expect
        .poll(() => page.getByRole("alert").first().textContent(), { timeout: 15_000 })
        .toMatch(/^The service is unavailable\..* Try again in \d+ s\.$/);
      await check(page, "jobs-503");
    } finally {
      jobReaper = await h.start(jobReaperService, env);
    }
    await area(page, "Notifications").click();
    await area(page, "Jobs").click();
    await page.getByRole("table", { name: "Jobs, newest first" }).waitFor({ timeout: 15_000 });
    await page.context().close();
    expect(problems).toEqual([]);
  }, 180_000);

  it("returns to sign-in with a message when the session is revoked", async () => {
    const api = bearerApi(() => base);
    const token = (await signIn(base, { username: DEMO.adminUserName, password: DEMO.adminPassword })).json<{
      accessToken: string;
    }>().accessToken;
    const role = await api("PUT", "/api/rbac/roles/job-watcher", token, {
      permissions: ["job.read"],
      scope: "platform",
    });
    expect(role.status, role.text).toBeLessThan(300);
    const user = await api("POST", "/api/users", token, {
      userName: "watcher",
      password: "a watcher's long password",
    });
    expect(user.status, user.text).toBe(201);
    const assigned = await api("PUT", `/api/rbac/users/${user.json<{ id: string }>().id}`, token, {
      role: "job-watcher",
    });
    expect(assigned.status, assigned.text).toBe(200);

    const page = await open();
    await signInAs(page, "watcher", "a watcher's long password");
    expect(await page.getByRole("navigation", { name: "Areas" }).getByRole("link").allTextContents()).toEqual(
      ["Jobs"],
    );
    await area(page, "Jobs").click();
    await page.getByRole("heading", { name: "Jobs" }).waitFor();
    // Changing the role revokes its holders' sessions: the console's next call gets 401.
    expect(
      (
        await api("PUT", "/api/rbac/roles/job-watcher", token, {
          permissions: ["job.read", "webhook.read"],
          scope: "platform",
        })
      ).status,
    ).toBe(200);
    await expect
      .poll(
        async () => {
          // Opening the page again asks the API again.
          await page
            .getByRole("link", { name: "svc admin" })
            .click({ timeout: 1_000 })
            .catch(() => undefined);
          await area(page, "Jobs")
            .click({ timeout: 1_000 })
            .catch(() => undefined);
          return page.getByText("Your session has ended (expired or revoked): sign in again.").count();
        },
        { timeout: 15_000 },
      )
      .toBe(1);
    await page.getByRole("button", { name: "Sign in" }).waitFor();
    await page.context().close();
  }, 60_000);

  it("shows a workspace admin only what the session's keys allow, and the API's 403 plainly", async () => {
    const api = bearerApi(() => base);
    const login = await signIn(base, { username: DEMO.adminUserName, password: DEMO.adminPassword });
    const token = login.json<{ accessToken: string }>().accessToken;
    const workspaceLogin = await signIn(base, {
      username: DEMO.adminUserName,
      password: DEMO.adminPassword,
      workspaceKey: DEMO.workspaceKey,
    });
    expect(workspaceLogin.status, workspaceLogin.text).toBe(200);
    const keys = decodeJwt(workspaceLogin.json<{ accessToken: string }>().accessToken).permission as string[];
    const expected = [
      ["Tenants and workspaces", "workspace.read"],
      ["Surfaces and snippets", "workspace.read"],
      ["Users", "user.read"],
      ["Members", "membership.read"],
      ["Roles", "role.read"],
      ["Integrations", "integration.read"],
      ["Plugins", "plugin.read"],
      ["Plugin chains", "plugin.assign"],
      ["Entitlements", "plugin.read"],
      ["Themes", "extension.read"],
      ["Webhooks", "webhook.read"],
      ["Flows", "flow.read"],
      ["Jobs", "job.read"],
      ["Notifications", "notification.read"],
      ["Custom fields", "customfield.read"],
      ["Media", "media.read"],
      ["Configuration", "config.read"],
      ["Diagnostics", "diagnostics.record"],
    ]
      .filter(([, key]) => keys.includes(key as string) || keys.includes("*"))
      .map(([label]) => label);
    // hello's admin page: for sessions that read plugins or hold one of its keys.
    if (keys.includes("plugin.read") || keys.some((k) => k.startsWith("hello."))) expected.push("hello");
    // The workspace session holds fewer keys than the platform's: the test means something.
    expect(expected.length).toBeLessThan(18);
    expect((await api("GET", "/api/tenants", token)).status).toBe(200);

    const page = await open();
    await signInAs(page, DEMO.adminUserName, DEMO.adminPassword, DEMO.workspaceKey);
    const shown = await page.getByRole("navigation", { name: "Areas" }).getByRole("link").allTextContents();
    expect(shown).toEqual(expected);
    // An area it may not open by address says why, instead of a blank page.
    // (The token is held in memory only: a page loaded by address signs in again.)
    await page.goto(`${base}/admin/plugins`);
    await signInAs(page, DEMO.adminUserName, DEMO.adminPassword, DEMO.workspaceKey, "Plugins");
    if (!expected.includes("Plugins")) {
      await page.getByText("Not allowed: this page needs the key plugin.read").waitFor();
    }
    await check(page, "workspace-admin");
    await page.context().close();
  });
});
