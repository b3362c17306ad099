/**
 * One flow's run through the `flow.run` handler, with its steps, the chain's budget and the circuit's
 * bucket in memory and a receiver on a local port: no NATS, no PostgreSQL. What a run promises: a flow
 * turned off or deleted runs nothing; a run that failed mid-way resumes at the first step not done (a
 * published event is not published again); a chain of flows stops at its budget; a flow publishes only
 * `flow.*` names and its workspace's plugins' events; placeholders never copy a sensitive value.
 */
import { createHmac, randomUUID } from "node:crypto";

import type { EventPublisher } from "@svc/bus";
import { type ClaimedJob, PermanentJobError } from "@svc/jobs";
import { createLogger } from "@svc/observability";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";

import { Receiver } from "../../../test/support/receiver.js";
import { type FlowRunDeps, type FlowRunPayload, type FlowRunTables, runFlow } from "./flow-run.js";
import type { StoredAction } from "./flows.js";
import { localOutbound } from "./memory-outbound.js";
import { PluginEventScopes } from "./plugin-contributions.js";
import { createSecretBox } from "./secrets.js";

/** The flow tables in memory, answering as the SQL does. */
class MemoryRuns implements FlowRunTables {
  readonly flows = new Map<string, boolean>();
  readonly steps = new Map<string, Set<number>>();
  readonly chains = new Map<string, number>();

  async flowIsActive(flowId: string) {
    return this.flows.get(flowId) ?? null;
  }
  async doneSteps(runKey: string) {
    return new Set(this.steps.get(runKey) ?? []);
  }
  async markStepDone(runKey: string, step: number) {
    this.steps.set(runKey, new Set([...(this.steps.get(runKey) ?? []), step]));
  }
  async countChainEvent(rootEventId: string) {
    const n = (this.chains.get(rootEventId) ?? 0) + 1;
    this.chains.set(rootEventId, n);
    return n;
  }
}

const secrets = createSecretBox(Buffer.alloc(32, 3).toString("base64"));

/** The receiver; each test sets its status. Its path and query hold a token, as receivers' URLs may. */
const receiver = new Receiver();
const received = receiver.received;
let status = 200;
receiver.respond = () => ({ status });
let target: string;
beforeAll(async () => {
  target = new URL("/flow/t0ken?key=t0ken", await receiver.start()).toString();
});
afterAll(() => receiver.stop());

let runs: MemoryRuns;
let published: Array<{
  eventName: string;
  data: unknown;
  eventId?: string;
  flowDepth?: number;
  flowRoot?: string;
}>;
let deps: FlowRunDeps;
const flowId = randomUUID();

beforeEach(() => {
  runs = new MemoryRuns();
  runs.flows.set(flowId, true);
  published = [];
  received.length = 0;
  status = 200;
  const events: EventPublisher = {
    publish: async (eventName, _workspaceKey, data, options) => {
      published.push({
        eventName,
        data,
        ...(options?.eventId ? { eventId: options.eventId } : {}),
        ...(options?.flowDepth === undefined ? {} : { flowDepth: options.flowDepth }),
        ...(options?.flowRoot ? { flowRoot: options.flowRoot } : {}),
      });
      return { eventId: options?.eventId ?? randomUUID(), seq: published.length, duplicate: false };
    },
  };
  const pluginEvents = new PluginEventScopes();
  pluginEvents.apply([{ pluginId: "crm", events: ["crm.lead-won"], workspaces: ["alpha"] } as never]);
  deps = {
    ...localOutbound(secrets),
    runs,
    pluginEvents,
    events,
    flowEventBudget: 10,
    log: createLogger("test", "silent"),
  };
});

function run(actions: StoredAction[], over: Partial<FlowRunPayload> = {}): ClaimedJob<FlowRunPayload> {
  return {
    id: "1",
    type: "flow.run",
    payload: {
      flowId,
      eventId: "ev-1",
      event: "user.created",
      workspaceKey: "alpha",
      occurredAtUtc: "2026-11-28T00:00:00.000Z",
      data: { userId: "u-1", password: "hunter2-secret" },
      depth: 0,
      actions,
      ...over,
    },
    workspaceKey: "alpha",
    attempt: 1,
    maxAttempts: 5,
    token: "1",
    runAt: new Date(),
    leaseExpiresAt: new Date(Date.now() + 60_000),
    traceContext: null,
    createdAt: new Date(),
  };
}

describe("the flow.run handler", () => {
  it("runs nothing for a flow turned off or deleted since the event matched", async () => {
    runs.flows.set(flowId, false);
    await runFlow(
      deps,
      run([
        { type: "publish", eventName: "flow.a" },
        { type: "http", url: target },
      ]),
    );
    runs.flows.delete(flowId);
    await runFlow(deps, run([{ type: "publish", eventName: "flow.a" }]));
    expect([published, received, [...runs.steps.keys()]]).toEqual([[], [], []]);
  });

  it("resumes at the first step not done: what was published is not published again", async () => {
    const actions: StoredAction[] = [
      { type: "publish", eventName: "flow.first" },
      { type: "http", url: target, secretEncrypted: secrets.seal("flow secret") },
      { type: "publish", eventName: "flow.last" },
    ];
    status = 500;
    // The error names the receiver's origin, never its path or query (a token can be there).
    await expect(runFlow(deps, run(actions))).rejects.toThrow(`${new URL(target).origin} answered 500`);
    expect(published.map((e) => e.eventName)).toEqual(["flow.first"]);
    status = 200;
    await runFlow(deps, run(actions));
    expect(published.map((e) => e.eventName)).toEqual(["flow.first", "flow.last"]);
    // The http step ran again (its attempt had failed, after the client's own two retries), always with one
    // identity and a signature that verifies.
    expect(received).toHaveLength(4);
    expect(new Set(received.map((r) => r.headers["x-svc-delivery"])).size).toBe(1);
    const body = received[3]?.body as string;
    expect(received[3]?.headers["x-svc-signature"]).toBe(
      `sha256=${createHmac("sha256", "flow secret").update(body).digest("hex")}`,
    );
    expect(body).not.toContain("hunter2-secret");
    // One depth more than the event's, in the chain the event started.
    expect(published[1]).toMatchObject({ flowDepth: 1, flowRoot: "ev-1" });
  });

  it("stops a chain of flows at its budget: the events over it are dropped and counted", async () => {
    deps = { ...deps, flowEventBudget: 2 };
    runs.chains.set("root-1", 1);
    const actions: StoredAction[] = [
      { type: "publish", eventName: "flow.one" },
      { type: "publish", eventName: "flow.two" },
      { type: "publish", eventName: "flow.three" },
    ];
    await runFlow(deps, run(actions, { rootEventId: "root-1", depth: 1 }));
    expect(published.map((e) => e.eventName)).toEqual(["flow.one"]);
    expect((await deps.metrics.flowEventsOverBudget.get()).values[0]?.value).toBe(2);
  });

  it("publishes only flow.* names and its workspace's plugins' events, never the platform's", async () => {
    await expect(runFlow(deps, run([{ type: "publish", eventName: "user.deleted" }]))).rejects.toBeInstanceOf(
      PermanentJobError,
    );
    // A plugin's event: in a workspace whose chain holds the plugin, not in another.
    await runFlow(deps, run([{ type: "publish", eventName: "crm.lead-won" }]));
    expect(published.map((e) => e.eventName)).toEqual(["crm.lead-won"]);
    await expect(
      runFlow(
        deps,
        run([{ type: "publish", eventName: "crm.lead-won" }], { workspaceKey: "beta", eventId: "ev-2" }),
      ),
    ).rejects.toBeInstanceOf(PermanentJobError);
  });

  it("copies no sensitive value through a placeholder into a notification or a published event", async () => {
    await runFlow(
      deps,
      run([
        { type: "notify", title: "New user {{data.userId}}: {{data.password}}" },
        { type: "publish", eventName: "flow.copied", data: { secret: "{{data.password}}" } },
      ]),
    );
    expect(JSON.stringify(published)).not.toContain("hunter2-secret");
    expect(published[0]).toMatchObject({ eventName: "flow.notification", data: { flowId } });
    expect((published[0]?.data as { title: string }).title).toContain("New user u-1");
  });
});
