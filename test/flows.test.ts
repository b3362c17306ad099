/**
 * Flows. A flow's trigger is matched like a webhook subscription; its actions (call a
 * URL, publish an event, create a notification) run in order as one durable `flow.run` job, and a run
 * whose dispatcher is killed mid-way is finished by another after the lease, each step once.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";

import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { createEventPublisher, EventSource } from "@svc/bus";
import { gatewayService } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { rbacService } from "@svc/service-rbac";
import { webhookDispatcherService } from "@svc/service-webhook-dispatcher";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { repoRoot } from "../scripts/lib/stack.js";
import { createHarness } from "./support/harness.js";
import { bearerApi, signIn } from "./support/http.js";
import { Receiver } from "./support/receiver.js";
import { mintToken } from "./support/tokens.js";
import { eventually, until } from "./support/wait.js";

const h = await createHarness();
const extra = {
  BackendHost__RateLimitApiPerMinute: "0",
  BackendHost__RateLimitAuthPerMinute: "0",
  BackendHost__RateLimitAuthPerAccountPerMinute: "0",
  BackendHost__WebhookAllowedNetworks__0: "127.0.0.1/32",
  BackendHost__JobLeaseMs: "1500",
  BackendHost__JobPollIntervalMs: "100",
  BackendHost__JobReaperIntervalMs: "100",
};
let base: string;
let operator: string;
let boss: string;
let nc: NatsConnection;
const children = new Set<ChildProcess>();
const receivers: Receiver[] = [];

const api = bearerApi(() => base);

interface FlowView {
  id: string;
  name: string;
  workspaceKey: string | null;
  eventName: string;
  isActive: boolean;
  actions: Array<Record<string, unknown>>;
}

const countEvents = async (eventName: string) => {
  const jsm = await jetstreamManager(nc);
  const info = await jsm.streams.info(h.env.SVC_EVENTS_STREAM as string, {
    subjects_filter: `${h.env.SVC_SUBJECT_PREFIX}.events.${eventName}`,
  });
  return info.state.subjects?.[`${h.env.SVC_SUBJECT_PREFIX}.events.${eventName}`] ?? 0;
};

/**
 * Flows have settled: no run waits or runs, and the dispatcher has matched (and acknowledged) every event
 * on the stream. A run publishes before it finishes, and an event's runs are enqueued before it is
 * acknowledged, so when both hold (checked runs, events, runs again) no run or event is still to come.
 */
const flowsQuiet = (flowIds: readonly string[]) => async () => {
  const busy = async () =>
    (
      await h.sql<{ n: number }>(
        `SELECT count(*)::int AS n FROM job_reaper.jobs
         WHERE type = 'flow.run' AND status IN ('Pending', 'Running') AND payload->>'flowId' = ANY($1)`,
        [flowIds],
      )
    )[0]?.n ?? 1;
  if ((await busy()) > 0) return false;
  const consumer = await (
    await jetstreamManager(nc)
  ).consumers.info(h.env.SVC_EVENTS_STREAM as string, "webhook-dispatcher");
  if (consumer.num_pending > 0 || consumer.num_ack_pending > 0) return false;
  return (await busy()) === 0;
};

beforeAll(async () => {
  await h.start(rbacService, extra);
  await h.start(jobReaperService, extra);
  base = (await h.start(gatewayService, extra)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
  nc = await connect(h.natsOptions());
  // A real user (a minted token's subject has no inbox) who may manage flows.
  const created = await api("POST", "/api/users", operator, {
    userName: "flow-boss",
    password: "flow-boss's long password",
  });
  const { id } = created.json<{ id: string }>();
  expect((await api("PUT", `/api/rbac/users/${id}`, operator, { role: "superadmin" })).status).toBe(200);
  const login = await signIn(base, { username: "flow-boss", password: "flow-boss's long password" });
  boss = login.json<{ accessToken: string }>().accessToken;
});
afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  for (const r of receivers) await r.stop();
  await nc?.close();
  await h.stopAll();
});

describe("flows API", () => {
  let dispatcher: Awaited<ReturnType<typeof h.start>>;
  beforeAll(async () => {
    dispatcher = await h.start(webhookDispatcherService, extra);
  });
  afterAll(async () => {
    await dispatcher.stop();
  });

  it("creates, lists, replaces and deletes flows; a secret is never shown and kept on replace", async () => {
    const created = await api("POST", "/api/flows", operator, {
      name: "Welcome",
      eventName: "user.created",
      actions: [
        { type: "http", url: "http://127.0.0.1:9/hook", secret: "s3cret-value" },
        { type: "notify", title: "New user {{data.userName}}" },
      ],
    });
    expect(created.status).toBe(201);
    const flow = created.json<FlowView>();
    expect(created.headers.location).toBe(`/api/flows/${flow.id}`);
    expect(created.text).not.toContain("s3cret-value");
    expect(flow).toMatchObject({
      name: "Welcome",
      workspaceKey: null,
      eventName: "user.created",
      isActive: true,
      matchesKnownEvent: true,
      actions: [
        { type: "http", url: "http://127.0.0.1:9/hook", hasSecret: true, includeSensitiveData: false },
        { type: "notify", title: "New user {{data.userName}}", detail: null, permission: "flow.manage" },
      ],
    });
    const stored = await h.sql<{ actions: string }>(
      `SELECT actions::text FROM webhook_dispatcher.flows WHERE id = $1`,
      [flow.id],
    );
    expect(stored[0]?.actions).not.toContain("s3cret-value");

    const replaced = await api("PUT", `/api/flows/${flow.id}`, operator, {
      name: "Welcome (paused)",
      eventName: "user.created",
      isActive: false,
      actions: [{ type: "http", url: "http://127.0.0.1:9/hook" }],
    });
    expect(replaced.status).toBe(200);
    expect(replaced.json<FlowView>()).toMatchObject({
      name: "Welcome (paused)",
      isActive: false,
      actions: [{ type: "http", hasSecret: true }],
    });

    const listed = await api("GET", "/api/flows?limit=10", operator);
    expect(listed.status).toBe(200);
    expect(listed.json<{ items: FlowView[] }>().items.map((f) => f.id)).toContain(flow.id);

    expect((await api("DELETE", `/api/flows/${flow.id}`, operator)).status).toBe(204);
    const again = await api("DELETE", `/api/flows/${flow.id}`, operator);
    expect(again.status).toBe(404);
    expect(again.headers["content-type"]).toContain("application/problem+json");
  });

  it("refuses a bad flow with every violation in one problem document", async () => {
    const res = await api("POST", "/api/flows", operator, {
      name: "",
      eventName: "user created",
      actions: [{ type: "teleport" }],
    });
    expect(res.status).toBe(400);
    const problem = res.json<{ errors: Array<{ field: string }> }>();
    const fields = problem.errors.map((e) => e.field);
    expect(fields).toEqual(expect.arrayContaining(["/body/name", "/body/eventName"]));
    expect(fields.some((f) => f.startsWith("/body/actions/0"))).toBe(true);

    // An address webhooks may not reach is refused for a flow too (the gateway's policy here allows
    // 127.0.0.1 only).
    const metadata = await api("POST", "/api/flows", operator, {
      name: "steal",
      eventName: "*",
      actions: [{ type: "http", url: "http://169.254.169.254/latest/meta-data" }],
    });
    expect(metadata.status).toBe(400);
    expect(metadata.json<{ errors: Array<{ field: string }> }>().errors[0]?.field).toBe(
      "/body/actions/0/url",
    );
    expect(
      (await api("POST", "/api/flows", operator, { name: "x", eventName: "*", actions: [] })).status,
    ).toBe(400);
  });

  it("keeps a workspace session's flows in its workspace", async () => {
    const admin = await mintToken({ scope: "workspace", workspaceKey: "default", roles: ["superadmin"] });
    const mine = await api("POST", "/api/flows", admin, {
      name: "local",
      eventName: "media.uploaded",
      workspaceKey: "default",
      actions: [{ type: "notify", title: "uploaded" }],
    });
    expect(mine.status).toBe(201);
    expect(mine.json<FlowView>().workspaceKey).toBe("default");
    const other = await api("POST", "/api/flows", admin, {
      name: "elsewhere",
      eventName: "media.uploaded",
      workspaceKey: "other",
      actions: [{ type: "notify", title: "uploaded" }],
    });
    expect(other.status).toBe(404);
    const platformFlow = await api("POST", "/api/flows", operator, {
      name: "platform",
      eventName: "media.uploaded",
      actions: [{ type: "notify", title: "uploaded" }],
    });
    const id = platformFlow.json<FlowView>().id;
    expect((await api("DELETE", `/api/flows/${id}`, admin)).status).toBe(404);
    expect((await api("DELETE", `/api/flows/${id}`, operator)).status).toBe(204);
    expect((await api("DELETE", `/api/flows/${mine.json<FlowView>().id}`, admin)).status).toBe(204);
  });
});

describe("flow runs", () => {
  it("a flow triggered by user.created completes its actions after the dispatcher was killed mid-run", async () => {
    const receiver = new Receiver();
    receivers.push(receiver);
    await receiver.start();
    // The first call hangs: the dispatcher is killed while it waits.
    receiver.respond = () => (receiver.received.length === 1 ? "hang" : { status: 200 });
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join("services", "webhook-dispatcher", "src", "main.ts")],
      {
        cwd: repoRoot,
        env: {
          ...(await h.envFor("webhook-dispatcher", extra)),
          PATH: process.env.PATH ?? "",
          BackendHost__WebhookTimeoutMs: "60000",
        },
        stdio: "ignore",
      },
    );
    children.add(child);
    const body = {
      name: "onboarding",
      eventName: "user.created",
      actions: [
        { type: "publish", eventName: "flow.onboarding-started", data: { who: "{{data.userName}}" } },
        { type: "http", url: receiver.url, secret: "flow-secret" },
        { type: "notify", title: "{{data.userName}} joined", detail: "via {{event}}" },
      ],
    };
    // The child serves the flow routes once it is up.
    const flow = await eventually(
      () => api("POST", "/api/flows", operator, body),
      (res) => res.status !== 503,
      30_000,
      200,
    );
    expect(flow.status).toBe(201);
    const flowId = flow.json<FlowView>().id;
    // rbac publishes user.created; the child matches it, runs step 0 (publish) and hangs in step 1.
    const user = await api("POST", "/api/users", operator, {
      userName: "flow-newcomer",
      password: "a long enough password",
    });
    expect(user.status).toBe(201);
    await receiver.waitFor(1, 30_000);
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    children.delete(child);

    const dispatcher = await h.startForTest(webhookDispatcherService, extra);
    await receiver.waitFor(2, 20_000);
    const [first, second] = receiver.received;
    expect(second?.headers["x-svc-delivery"]).toBe(first?.headers["x-svc-delivery"]);
    expect(second?.headers["x-svc-flow"]).toBe(flowId);
    expect(second?.headers["x-svc-signature"]).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(JSON.parse(second?.body ?? "{}")).toMatchObject({
      event: "user.created",
      flowId,
      data: { userName: "flow-newcomer" },
    });

    const runs = await eventually(
      () =>
        h.sql<{ status: string; attempts: number }>(
          `SELECT status, attempts FROM job_reaper.jobs WHERE type = 'flow.run' AND payload->>'flowId' = $1`,
          [flowId],
        ),
      (rows) => rows.length === 1 && rows[0]?.status === "Succeeded",
      20_000,
    );
    expect(runs[0]?.attempts).toBe(2);
    // Step 0 ran before the kill and was not repeated; the notification reached the flow managers.
    expect(await countEvents("flow.onboarding-started")).toBe(1);
    const inbox = await eventually(
      async () =>
        (await api("GET", "/api/notifications?limit=100", boss)).json<{
          items: Array<{ kind: string; title: string; detail: string | null }>;
        }>().items,
      (items) => items.some((n) => n.kind === "flow.notification"),
      15_000,
    );
    expect(inbox.filter((n) => n.kind === "flow.notification")).toEqual([
      expect.objectContaining({ title: "flow-newcomer joined", detail: "via user.created" }),
    ]);
    expect((await api("DELETE", `/api/flows/${flowId}`, operator)).status).toBe(204);
    await dispatcher.stop();
  }, 90_000);

  it("refuses a flow that would publish a core event of the platform", async () => {
    const dispatcher = await h.startForTest(webhookDispatcherService, extra);
    for (const eventName of ["user.deleted", "plugin.refused", "flow.", "hello.greeted"]) {
      const refused = await api("POST", "/api/flows", operator, {
        name: "impostor",
        eventName: "user.created",
        actions: [{ type: "publish", eventName }],
      });
      expect(refused.status, eventName).toBe(400);
      expect(refused.json<{ errors: Array<{ field: string }> }>().errors[0]?.field).toBe(
        "/body/actions/0/eventName",
      );
    }
    // Its own namespace is fine.
    const own = await api("POST", "/api/flows", operator, {
      name: "own",
      eventName: "user.created",
      actions: [{ type: "publish", eventName: "flow.user-welcomed" }],
    });
    expect(own.status, own.text).toBe(201);
    expect((await api("DELETE", `/api/flows/${own.json<FlowView>().id}`, operator)).status).toBe(204);
    await dispatcher.stop();
  }, 40_000);

  it("stops a wide chain of flows at its event budget and caps flows per workspace", async () => {
    const dispatcher = await h.startForTest(webhookDispatcherService, {
      ...extra,
      BackendHost__FlowEventBudget: "15",
      BackendHost__MaxFlowsPerWorkspace: "3",
    });
    // Three flows, each publishing its own trigger three times: 9 events, then 81, then 729 without a budget.
    const flow = (n: number) => ({
      name: `fan-${n}`,
      workspaceKey: "amp",
      eventName: "flow.amp",
      actions: [1, 2, 3].map(() => ({ type: "publish", eventName: "flow.amp" })),
    });
    const ids: string[] = [];
    for (const n of [1, 2, 3]) {
      const created = await api("POST", "/api/flows", operator, flow(n));
      expect(created.status, created.text).toBe(201);
      ids.push(created.json<FlowView>().id);
    }
    const fourth = await api("POST", "/api/flows", operator, flow(4));
    expect(fourth.status).toBe(409);
    expect(fourth.json()).toMatchObject({ rule: "flows-per-workspace", limit: 3 });
    // Another workspace has its own allowance.
    const elsewhere = await api("POST", "/api/flows", operator, { ...flow(5), workspaceKey: "amp-2" });
    expect(elsewhere.status).toBe(201);
    ids.push(elsewhere.json<FlowView>().id);

    await createEventPublisher(nc, h.env.SVC_SUBJECT_PREFIX as string, EventSource.flow("test")).publish(
      "flow.amp",
      "amp",
      { n: 1 },
    );
    await until(async () => (await countEvents("flow.amp")) >= 16, 20_000);
    await until(flowsQuiet(ids), 20_000, 100);
    expect(await countEvents("flow.amp")).toBe(16);
    const over = dispatcher.deps.metrics.getSingleMetric("svc_flow_events_over_budget_total");
    expect((await over?.get())?.values[0]?.value).toBeGreaterThan(0);
    for (const id of ids) await api("DELETE", `/api/flows/${id}`, operator);
    await dispatcher.stop();
  }, 40_000);

  it("fills placeholders from masked data: a flow cannot copy an e-mail address into a new name", async () => {
    const dispatcher = await h.startForTest(webhookDispatcherService, extra);
    const created = await api("POST", "/api/flows", operator, {
      name: "copier",
      eventName: "flow.secret-in",
      actions: [
        { type: "publish", eventName: "flow.secret-out", data: { copied: "{{data.email}}" } },
        { type: "notify", title: "pw={{data.EMAIL}}", detail: "{{data}}" },
      ],
    });
    expect(created.status, created.text).toBe(201);
    await createEventPublisher(nc, h.env.SVC_SUBJECT_PREFIX as string, EventSource.flow("test")).publish(
      "flow.secret-in",
      null,
      {
        email: "someone@example.test",
        EMAIL: "someone@example.test",
      },
    );
    await until(async () => (await countEvents("flow.secret-out")) >= 1, 20_000);
    const jsm = await jetstreamManager(nc);
    const out = await jsm.streams.getMessage(h.env.SVC_EVENTS_STREAM as string, {
      last_by_subj: `${h.env.SVC_SUBJECT_PREFIX}.events.flow.secret-out`,
    });
    expect(out?.json<{ copied: string }>().copied).toBe("som***st");
    const notes = await eventually(
      () =>
        h.sql<{ title: string; detail: string }>(
          `SELECT title, detail FROM rbac.notifications WHERE title LIKE 'pw=%'`,
        ),
      (rows) => rows.length > 0,
    );
    expect(notes.length).toBeGreaterThan(0);
    for (const n of notes) expect(`${n.title} ${n.detail}`).not.toContain("someone@example.test");
    await api("DELETE", `/api/flows/${created.json<FlowView>().id}`, operator);
    await dispatcher.stop();
  }, 40_000);

  it("sends a flow's http actions through the receiver's circuit", async () => {
    const dispatcher = await h.startForTest(webhookDispatcherService, {
      ...extra,
      BackendHost__WebhookCircuitFailureThreshold: "2",
      BackendHost__WebhookCircuitOpenMs: "60000",
    });
    const failing = new Receiver();
    failing.respond = () => ({ status: 500 });
    receivers.push(failing);
    await failing.start();
    const created = await api("POST", "/api/flows", operator, {
      name: "caller",
      workspaceKey: "cb",
      eventName: "flow.cb",
      actions: [{ type: "http", url: failing.url }],
    });
    expect(created.status, created.text).toBe(201);
    const events = createEventPublisher(nc, h.env.SVC_SUBJECT_PREFIX as string, EventSource.flow("test"));
    await events.publish("flow.cb", "cb", { n: 1 });
    await events.publish("flow.cb", "cb", { n: 2 });
    // Each run's attempt tries three times (two in-attempt retries on a 5xx), then counts one failure.
    await failing.waitFor(6);
    // Two failures opened the circuit (each counted before its run's attempt is written back): the next
    // run is deferred without calling the receiver.
    await until(async () => {
      const rows = await h.sql<{ n: number }>(
        `SELECT count(*)::int AS n FROM job_reaper.jobs WHERE type = 'flow.run' AND last_error IS NOT NULL`,
      );
      return (rows[0]?.n ?? 0) >= 2;
    }, 20_000);
    const calls = failing.received.length;
    await events.publish("flow.cb", "cb", { n: 3 });
    await until(async () => {
      const rows = await h.sql<{ n: number }>(
        `SELECT count(*)::int AS n FROM job_reaper.jobs WHERE type = 'flow.run' AND last_error LIKE 'circuit open for %'`,
      );
      return (rows[0]?.n ?? 0) > 0;
    }, 20_000);
    expect(failing.received.length).toBe(calls);
    await api("DELETE", `/api/flows/${created.json<FlowView>().id}`, operator);
    await dispatcher.stop();
  }, 40_000);

  it("stops a chain of flows that publish their own trigger after three runs", async () => {
    const dispatcher = await h.startForTest(webhookDispatcherService, extra);
    const flow = await api("POST", "/api/flows", operator, {
      name: "echo",
      eventName: "flow.ping",
      actions: [{ type: "publish", eventName: "flow.ping" }],
    });
    const flowId = flow.json<FlowView>().id;
    await createEventPublisher(nc, h.env.SVC_SUBJECT_PREFIX as string, EventSource.flow("test")).publish(
      "flow.ping",
      null,
      { n: 1 },
    );
    await until(async () => (await countEvents("flow.ping")) >= 4, 20_000);
    await until(flowsQuiet([flowId]), 20_000, 100);
    const runs = await h.sql<{ n: number }>(
      `SELECT count(*)::int AS n FROM job_reaper.jobs WHERE type = 'flow.run' AND payload->>'flowId' = $1`,
      [flowId],
    );
    expect(runs[0]?.n).toBe(3);
    expect(await countEvents("flow.ping")).toBe(4);
    await api("DELETE", `/api/flows/${flowId}`, operator);
    await dispatcher.stop();
  }, 40_000);
});
