/**
 * What the reaper announces of a dead letter: the job, its attempts and the start of its last error, the
 * subscription of a failed webhook delivery, under an event id made from the job's (a repeated publish is
 * dropped); and nothing for a failed delivery of an event about deliveries, which would otherwise feed
 * every failing subscription to every other one.
 */
import { describe, expect, it } from "vitest";

import { deadLetterEvent } from "./reaper.js";

const job = (
  type: string,
  fields: Record<string, string | null> = {},
  lastError: string | null = "boom",
) => ({
  id: "42",
  type,
  workspaceKey: "shop",
  attempts: 5,
  lastError,
  fields,
});

describe("dead letters announced", () => {
  it("names the job, its attempts and the start of its last error, under an event id of the job's", () => {
    const event = deadLetterEvent(job("report.build", {}, "x".repeat(2_000)));
    expect(event?.eventId).toBe("job-dead-lettered-42");
    expect(event?.data).toEqual({
      jobId: "42",
      type: "report.build",
      workspaceKey: "shop",
      attempts: 5,
      lastError: "x".repeat(500),
    });
  });

  it("names a failed delivery's subscription, and only a delivery's", () => {
    expect(
      deadLetterEvent(job("webhook.deliver", { subscriptionId: "s-1", event: "user.created" }))?.data,
    ).toMatchObject({
      subscriptionId: "s-1",
    });
    expect(deadLetterEvent(job("report.build", { subscriptionId: "s-1" }))?.data).not.toHaveProperty(
      "subscriptionId",
    );
  });

  it("announces no failed delivery of an event about deliveries", () => {
    for (const event of ["job.dead-lettered", "webhook.circuit-opened", "webhook.disabled"]) {
      expect(deadLetterEvent(job("webhook.deliver", { subscriptionId: "s-1", event }))).toBeNull();
    }
    // The same events in another job's payload are no delivery: announced.
    expect(deadLetterEvent(job("flow.run", { event: "webhook.disabled" }))).not.toBeNull();
  });
});
