/**
 * Notifications. A job that dead-letters (announced by the job reaper), a webhook
 * receiver's opened circuit and a plugin refused at re-verification (their events) become notifications
 * for the operators who can act on them; each operator lists their own, unread first, and marks them read.
 */
import { jetstream } from "@nats-io/jetstream";
import { connect, headers as natsHeaders, type NatsConnection } from "@nats-io/transport-node";
import { gatewayService } from "@svc/service-gateway";
import { jobReaperService } from "@svc/service-job-reaper";
import { rbacService } from "@svc/service-rbac";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi, signIn } from "./support/http.js";
import { mintToken } from "./support/tokens.js";
import { eventually } from "./support/wait.js";

const h = await createHarness();
let base: string;
let operator: string;
let nc: NatsConnection;
const env = {
  BackendHost__RateLimitApiPerMinute: "0",
  BackendHost__RateLimitAuthPerMinute: "0",
  BackendHost__RateLimitAuthPerAccountPerMinute: "0",
  BackendHost__JobReaperIntervalMs: "100",
};

const api = bearerApi(() => base);

async function userWithRole(userName: string, role: string, permissions: string[] | null): Promise<string> {
  if (permissions !== null)
    expect((await api("PUT", `/api/rbac/roles/${role}`, operator, { permissions })).status).toBe(201);
  const created = await api("POST", "/api/users", operator, {
    userName,
    password: `${userName}'s long password`,
  });
  const { id } = created.json<{ id: string }>();
  expect((await api("PUT", `/api/rbac/users/${id}`, operator, { role })).status).toBe(200);
  const login = await signIn(base, { username: userName, password: `${userName}'s long password` });
  return login.json<{ accessToken: string }>().accessToken;
}

interface Notification {
  id: string;
  kind: string;
  title: string;
  detail: string | null;
  readAtUtc: string | null;
}
const inbox = async (token: string) =>
  (await api("GET", "/api/notifications?limit=100", token)).json<{ items: Notification[] }>().items;

async function publish(eventName: string, payload: unknown, eventId: string) {
  const h2 = natsHeaders();
  await jetstream(nc).publish(`${h.env.SVC_SUBJECT_PREFIX}.events.${eventName}`, JSON.stringify(payload), {
    msgID: eventId,
    headers: h2,
  });
}

let boss: string;
let webhooks: string;
let jobs: string;

beforeAll(async () => {
  await h.start(rbacService, env);
  await h.start(jobReaperService, env);
  base = (await h.start(gatewayService, env)).hooks.httpAddress as string;
  operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
  nc = await connect(h.natsOptions());
  boss = await userWithRole("boss", "superadmin", null);
  webhooks = await userWithRole("hooks", "hook-ops", ["webhook.manage", "notification.read"]);
  jobs = await userWithRole("jobs", "job-ops", ["job.read", "notification.read"]);
});
afterAll(async () => {
  await nc?.close();
  await h.stopAll();
});

describe("notifications", () => {
  it("tells the operators who can act about a dead-lettered job, once", async () => {
    await h.sql(
      `INSERT INTO job_reaper.jobs (type, status, attempts, max_attempts, last_error) VALUES ('report.build', 'Failed', 5, 5, 'the report service answered 500')`,
    );
    const mine = await eventually(
      () => inbox(jobs),
      (items) => items.length === 1,
    );
    expect(mine).toEqual([
      expect.objectContaining({
        kind: "job.dead-lettered",
        title: expect.stringMatching(/^Job report\.build #\d+ failed for good after 5 attempt/),
        detail: "the report service answered 500",
        readAtUtc: null,
      }),
    ]);
    expect(
      await eventually(
        () => inbox(boss),
        (items) => items.length === 1,
      ),
    ).toHaveLength(1);
    // The webhook operator cannot act on a report job.
    expect(await inbox(webhooks)).toEqual([]);
    // Announced once: a later sweep, seen announcing another dead letter, adds nothing about the first.
    await h.sql(
      `INSERT INTO job_reaper.jobs (type, status, attempts, max_attempts, last_error) VALUES ('report.later', 'Failed', 1, 1, 'later')`,
    );
    const both = await eventually(
      () => inbox(jobs),
      (items) => items.length >= 2,
    );
    expect(both.map((n) => n.title.split(" #")[0]).sort()).toEqual(["Job report.build", "Job report.later"]);
    // The later one served its purpose: the next tests count the inbox without it.
    await h.sql(`DELETE FROM rbac.notifications WHERE title LIKE 'Job report.later%'`);
  });

  it("tells webhook operators about an opened circuit and plugin operators about a refused plugin", async () => {
    await publish(
      "webhook.circuit-opened",
      { origin: "https://hooks.example", failures: 5, openForMs: 30_000 },
      "c-1",
    );
    await publish(
      "webhook.circuit-opened",
      { origin: "https://hooks.example", failures: 5, openForMs: 30_000 },
      "c-1",
    );
    await publish(
      "plugin.refused",
      { pluginId: "hello", version: "1.0.0", reason: "revoked-signer: …" },
      "p-1",
    );
    await publish(
      "webhook.disabled",
      {
        subscriptionId: "5f0c2a8e-3b7e-4a55-9a4f-2f6c1f3b9d10",
        origin: "https://gone.example",
        reason: "the receiver answered 410 Gone",
      },
      "d-1",
    );
    const hooks = await eventually(
      () => inbox(webhooks),
      (items) => items.length === 2,
    );
    expect(hooks).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          kind: "webhook.circuit-opened",
          title: "Webhook deliveries to https://hooks.example are paused",
        }),
        expect.objectContaining({
          kind: "webhook.disabled",
          title: "A webhook subscription to https://gone.example was turned off",
        }),
      ]),
    );
    const all = await eventually(
      () => inbox(boss),
      (items) => items.length === 4,
    );
    expect(all.map((n) => n.kind).sort()).toEqual([
      "job.dead-lettered",
      "plugin.refused",
      "webhook.circuit-opened",
      "webhook.disabled",
    ]);
    expect((await inbox(jobs)).map((n) => n.kind)).toEqual(["job.dead-lettered"]);
  });

  it("lists unread first and marks one read; another's is not found", async () => {
    const [first] = await inbox(boss);
    const read = await api("PUT", `/api/notifications/${first?.id}/read`, boss);
    expect(read.status, read.text).toBe(200);
    expect(read.json<Notification>().readAtUtc).not.toBeNull();
    const after = await inbox(boss);
    expect(after.at(-1)?.id).toBe(first?.id);
    expect(after.slice(0, -1).every((n) => n.readAtUtc === null)).toBe(true);
    const unread = (await api("GET", "/api/notifications?unreadOnly=true", boss, undefined)).json<{
      items: unknown[];
    }>();
    expect(unread.items).toHaveLength(3);
    expect((await api("PUT", `/api/notifications/${first?.id}/read`, jobs)).status).toBe(404);
    // Paging walks them all once.
    const page1 = (await api("GET", "/api/notifications?limit=2", boss)).json<{
      items: Notification[];
      nextCursor: string;
    }>();
    const page2 = (
      await api("GET", `/api/notifications?limit=2&cursor=${encodeURIComponent(page1.nextCursor)}`, boss)
    ).json<{ items: Notification[]; nextCursor: string | null }>();
    expect([...page1.items, ...page2.items].map((n) => n.id)).toEqual(after.map((n) => n.id));
    expect(page2.nextCursor).toBeNull();
  });
});

/**
 * Notifications stay in their workspace, and flows cannot write to operators. The attack:
 * a workspace flow's notify action (free-text key, an attacker's title with a link) reached every
 * superadmin's inbox, and a workspace session listed and marked read other workspaces' notifications.
 */
describe("notifications stay in their workspace", () => {
  it("a workspace flow's notification reaches only that workspace's members, marked as a flow's text", async () => {
    const member = await api("POST", "/api/users", operator, {
      userName: "ws-flow-reader",
      password: "a long enough password",
    });
    const memberId = member.json<{ id: string }>().id;
    expect(
      (await api("PUT", "/api/rbac/roles/ws-flows", operator, { permissions: ["flow.manage"] })).status,
    ).toBe(201);
    // Memberships are the resolver's workspaces' (not started here): set up in the table itself.
    await h.sql(`INSERT INTO rbac.memberships (workspace_key, user_id) VALUES ('ws-n', '${memberId}')`);
    await h.sql(
      `INSERT INTO rbac.membership_roles (workspace_key, user_id, role) VALUES ('ws-n', '${memberId}', 'ws-flows')`,
    );
    const h2 = natsHeaders();
    h2.set("Svc-Workspace-Key", "ws-n");
    await jetstream(nc).publish(
      `${h.env.SVC_SUBJECT_PREFIX}.events.flow.notification`,
      JSON.stringify({
        flowId: "f1",
        title: "Your password expired: sign in at https://evil.example",
        permission: "flow.manage",
      }),
      { msgID: "flow-note-1", headers: h2 },
    );
    const asMember = await mintToken({
      sub: memberId,
      scope: "workspace",
      workspaceKey: "ws-n",
      permissions: ["flow.manage", "notification.read"],
    });
    const seen = await eventually(
      () => inbox(asMember),
      (items) => items.length > 0,
    );
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ kind: "flow.notification", origin: "flow" });
    // No operator got it, although superadmins and `*` hold flow.manage.
    const notes = await h.sql<{ n: number }>(
      `SELECT count(*)::int AS n FROM rbac.notifications WHERE event_id = 'flow-note-1'`,
    );
    expect(notes[0]?.n).toBe(1);
    expect((await inbox(boss)).some((n) => n.title.includes("evil.example"))).toBe(false);

    // The member's session of another workspace neither lists nor marks it.
    const elsewhere = await mintToken({
      sub: memberId,
      scope: "workspace",
      workspaceKey: "ws-other",
      permissions: ["notification.read"],
    });
    expect(await inbox(elsewhere)).toEqual([]);
    expect((await api("PUT", `/api/notifications/${seen[0]?.id}/read`, elsewhere)).status).toBe(404);
    expect((await api("PUT", `/api/notifications/${seen[0]?.id}/read`, asMember)).status).toBe(200);
  });

  it("a workspace session of an operator sees none of the operator's platform notifications", async () => {
    const bossId = (await h.sql<{ id: string }>(`SELECT id FROM rbac.users WHERE user_name = 'boss'`))[0]?.id;
    expect((await inbox(boss)).length).toBeGreaterThan(0);
    const inWorkspace = await mintToken({
      sub: bossId,
      scope: "workspace",
      workspaceKey: "ws-n",
      permissions: ["notification.read"],
    });
    expect(await inbox(inWorkspace)).toEqual([]);
  });
});
