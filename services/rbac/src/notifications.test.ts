/**
 * What each followed event means for the operators, and who gets it: the key its recipients must hold,
 * its title and detail (bounded), and whether only the members of its workspace get it (what a flow
 * wrote about a workspace never reaches the platform's operators).
 */
import type { Principal } from "@svc/bus";
import { callRoute, rbacRoutes } from "@svc/contracts";
import { ErrorCode } from "@svc/errors";
import { describe, expect, it } from "vitest";

import {
  type InboxTables,
  listNotifications,
  markRead,
  notificationOf,
  type NotificationRow,
} from "./notifications.js";

describe("notifications of the followed events", () => {
  it("addresses a failed webhook delivery to webhook managers and other dead letters to job readers", () => {
    const deadLetter = (type: string) =>
      notificationOf({
        eventName: "job.dead-lettered",
        workspaceKey: null,
        data: { type, jobId: "7", attempts: 5, lastError: "HTTP 500" },
      });
    expect(deadLetter("webhook.deliver")).toEqual({
      key: "webhook.manage",
      title: "Job webhook.deliver #7 failed for good after 5 attempt(s)",
      detail: "HTTP 500",
      membersOnly: false,
    });
    expect(deadLetter("report.build")?.key).toBe("job.read");
  });

  it("gives the receivers' and the runtime's events to the holders of the key that acts on them", () => {
    const keyOf = (eventName: string) => notificationOf({ eventName, workspaceKey: "shop", data: {} })?.key;
    expect(keyOf("webhook.circuit-opened")).toBe("webhook.manage");
    expect(keyOf("webhook.disabled")).toBe("webhook.manage");
    expect(keyOf("plugin.refused")).toBe("plugin.execute");
    expect(notificationOf({ eventName: "user.created", workspaceKey: null, data: {} })).toBeNull();
  });

  it("keeps a flow's notification about a workspace to its members, under the key it names when well formed", () => {
    const flow = (workspaceKey: string | null, permission: unknown, title: unknown = "Order placed") =>
      notificationOf({
        eventName: "flow.notification",
        workspaceKey,
        data: { permission, title, detail: "x".repeat(3_000) },
      });
    expect(flow("shop", "crm.contact.read")).toEqual({
      key: "crm.contact.read",
      title: "Order placed",
      detail: "x".repeat(2_000),
      membersOnly: true,
    });
    // A key that is not one, or none: flow managers.
    expect(flow("shop", "*")?.key).toBe("flow.manage");
    expect(flow("shop", 42)?.key).toBe("flow.manage");
    // A flow of no workspace (the platform's own) reaches the platform's holders too.
    expect(flow(null, "flow.manage")?.membersOnly).toBe(false);
    expect(flow("shop", "flow.manage", "y".repeat(900))?.title).toHaveLength(500);
    expect(flow("shop", "flow.manage", "")?.title).toBe("A flow ran");
  });
});

/** The notification table in memory, answering as the SQL does; `asked` counts the questions. */
class MemoryInbox implements InboxTables {
  readonly rows: Array<Omit<NotificationRow, "read_flag"> & { user_id: string }> = [];
  asked = 0;
  private clock = Date.parse("2026-11-27T10:00:00.000Z");

  add(userId: string, workspaceKey: string | null, title: string, kind = "job.dead-lettered") {
    const row = {
      id: crypto.randomUUID(),
      user_id: userId,
      kind,
      title,
      detail: null,
      workspace_key: workspaceKey,
      data: {},
      created_at: new Date((this.clock += 1_000)),
      read_at: null as Date | null,
    };
    this.rows.push(row);
    return row;
  }

  async page(
    userId: string,
    within: string | null,
    unreadOnly: boolean,
    page: { limit: number; after: string[] | null },
  ) {
    this.asked++;
    const flag = (r: { read_at: Date | null }) => (r.read_at === null ? 0 : 1);
    const key = (r: (typeof this.rows)[number]) => [flag(r), r.created_at.getTime(), r.id] as const;
    const after =
      page.after === null
        ? null
        : ([Number(page.after[0]), Date.parse(page.after[1] as string), page.after[2]] as const);
    // Unread first, then newest first.
    const before = (a: readonly [number, number, string], b: readonly [number, number, string]) =>
      a[0] !== b[0] ? a[0] < b[0] : a[1] !== b[1] ? a[1] > b[1] : a[2] > b[2];
    return this.rows
      .filter((r) => r.user_id === userId && (within === null || r.workspace_key === within))
      .filter((r) => !unreadOnly || r.read_at === null)
      .filter((r) => after === null || before(after as never, key(r) as never))
      .sort((a, b) => (before(key(a) as never, key(b) as never) ? -1 : 1))
      .slice(0, page.limit + 1)
      .map((r) => ({ ...r, read_flag: flag(r) }));
  }

  async markRead(id: string, userId: string, within: string | null) {
    this.asked++;
    const row = this.rows.find(
      (r) => r.id === id && r.user_id === userId && (within === null || r.workspace_key === within),
    );
    if (row === undefined) return null;
    row.read_at ??= new Date((this.clock += 1_000));
    return { ...row, read_flag: 1 };
  }
}

const USER = "6f1c2a5e-1b7d-4c1e-9f1a-2b3c4d5e6f70";
const OTHER = "0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d";
const platform = (subject = USER): Principal => ({
  subject,
  scope: "platform",
  workspaceKey: null,
  permissions: ["notification.read"],
  roles: ["operator"],
});
const member = (workspaceKey: string): Principal => ({
  subject: USER,
  scope: "workspace",
  workspaceKey,
  permissions: ["notification.read"],
  roles: ["admin"],
});

const inbox = (tables: MemoryInbox) => ({
  list: (principal: Principal, query: Record<string, unknown> = {}) =>
    callRoute(rbacRoutes["notifications.list"], (req) => listNotifications({ inbox: tables }, req), {
      principal,
      params: {},
      query,
      body: null,
    }),
  read: (principal: Principal, id: string) =>
    callRoute(rbacRoutes["notifications.read"], (req) => markRead({ inbox: tables }, req), {
      principal,
      params: { id },
      query: {},
      body: null,
    }),
});

describe("the inbox", () => {
  it("lists the user's own, unread first and newest first, a workspace session only its workspace's", async () => {
    const tables = new MemoryInbox();
    const api = inbox(tables);
    const first = tables.add(USER, null, "platform one");
    const shop = tables.add(USER, "shop", "shop one", "flow.notification");
    const later = tables.add(USER, null, "platform two");
    tables.add(OTHER, null, "someone else's");
    await api.read(platform(), first.id);
    const all = await api.list(platform());
    expect(all.body?.items.map((n) => n.title)).toEqual(["platform two", "shop one", "platform one"]);
    expect(all.body?.items[1]).toMatchObject({ origin: "flow", workspaceKey: "shop", readAtUtc: null });
    expect(all.body?.items[2]?.readAtUtc).not.toBeNull();
    expect((await api.list(platform(), { unreadOnly: true })).body?.items.map((n) => n.id)).toEqual([
      later.id,
      shop.id,
    ]);
    expect((await api.list(member("shop"))).body?.items.map((n) => n.id)).toEqual([shop.id]);
    // Paging follows the same order.
    const page = await api.list(platform(), { limit: 2 });
    const next = await api.list(platform(), { limit: 2, cursor: page.body?.nextCursor });
    expect(next.body?.items.map((n) => n.id)).toEqual([first.id]);
  });

  it("marks only the user's own read, in the session's workspace, keeping the first time", async () => {
    const tables = new MemoryInbox();
    const api = inbox(tables);
    const shop = tables.add(USER, "shop", "shop one");
    const theirs = tables.add(OTHER, null, "someone else's");
    await expect(api.read(platform(), theirs.id)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    await expect(api.read(member("other"), shop.id)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(theirs.read_at).toBeNull();
    const read = await api.read(member("shop"), shop.id);
    const again = await api.read(platform(), shop.id);
    expect(again.body?.readAtUtc).toBe(read.body?.readAtUtc);
  });

  it("is empty for a caller that is not a user, without asking the table", async () => {
    const tables = new MemoryInbox();
    tables.add(USER, null, "one");
    expect((await inbox(tables).list(platform("api-key:ci"))).body).toEqual({ items: [], nextCursor: null });
    expect(tables.asked).toBe(0);
  });
});
