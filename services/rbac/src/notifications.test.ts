/**
 * What each followed event means for the operators, and who gets it: the key its recipients must hold,
 * its title and detail (bounded), and whether only the members of its workspace get it (what a flow
 * wrote about a workspace never reaches the platform's operators).
 */
import { describe, expect, it } from "vitest";

import { notificationOf } from "./notifications.js";

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
