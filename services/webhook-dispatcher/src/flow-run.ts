/**
 * The `flow.run` job: runs one flow's actions, in order, for one event. Each finished
 * step is recorded in `webhook_dispatcher.flow_steps`, so a run whose dispatcher died mid-way (the job is
 * claimed again after its lease) resumes at the first step not done. A step interrupted by the crash runs
 * again, with the same identity: the http action's `X-Svc-Delivery`, and the event id of a published
 * event or notification (JetStream drops the duplicate within its window; rbac records a notification
 * once per user and event id). A failed step fails the attempt; the engine retries with backoff (five
 * attempts) and then dead-letters the run, which notifies the operators.
 *
 * Events published by a flow carry `Svc-Flow-Depth` (one more than the triggering event's); flows do
 * not trigger on events of depth MAX_FLOW_DEPTH, so flows that publish each other's triggers stop.
 */

import type { EventPublisher } from "@svc/bus";
import type { PlatformEventData } from "@svc/contracts";
import { type Db, sql } from "@svc/db";
import { type ClaimedJob, defineJob, PermanentJobError } from "@svc/jobs";
import type { Logger } from "@svc/observability";
import { EventSource, WebhookHeader } from "@svc/wire-contract";

import type { CircuitBreaker } from "./circuit-breaker.js";
import {
  admitThroughCircuit,
  deferWhilePaused,
  type OutboundDeps,
  postJson,
  receiverKey,
  recordOnCircuit,
  shownData,
  signature,
} from "./deliver.js";
import { derivedUuid } from "./derived-uuid.js";
import { DEFAULT_NOTIFY_PERMISSION, FLOW_EVENT_PREFIX, mayPublish, type StoredAction } from "./flows.js";
import type { WebhookMetrics } from "./metrics.js";
import type { PluginEventScopes } from "./plugin-contributions.js";

/** Events of this depth (published by a chain of this many flows) trigger no flow. */
export const MAX_FLOW_DEPTH = 3;
/** The event a notify action publishes; rbac turns it into notifications. */
export const FLOW_NOTIFICATION_EVENT = "flow.notification";

export interface FlowRunPayload {
  flowId: string;
  eventId: string;
  event: string;
  workspaceKey: string | null;
  occurredAtUtc: string;
  data: unknown;
  /** The triggering event's flow depth (0 for an event no flow published). */
  depth: number;
  /** The event that started this chain of flows (absent in runs queued before the budget: the event's id). */
  rootEventId?: string;
  /** The flow's actions when the event matched: a later edit does not change a queued run. */
  actions: StoredAction[];
}

/** A flow's run on one event: five attempts. */
export const flowRunJob = defineJob<FlowRunPayload>("flow.run", { maxAttempts: 5 });

/** What a run reads and writes besides its actions: the flow's state, its steps, its chain's budget. */
export interface FlowRunTables {
  /** Whether the flow is on; null when it was deleted. */
  flowIsActive(flowId: string): Promise<boolean | null>;
  /** The steps of this run that finished before. */
  doneSteps(runKey: string): Promise<ReadonlySet<number>>;
  /** Records a finished step (once). */
  markStepDone(runKey: string, step: number): Promise<void>;
  /** Counts one more event published in the chain `rootEventId` started: how many now. */
  countChainEvent(rootEventId: string): Promise<number>;
}

/** The flow tables in PostgreSQL. */
export function flowRunTables(db: Db): FlowRunTables {
  return {
    flowIsActive: async (flowId) =>
      (
        await db.maybeOne<{ is_active: boolean }>(sql`
          SELECT is_active FROM webhook_dispatcher.flows WHERE id = ${flowId}`)
      )?.is_active ?? null,
    doneSteps: async (runKey) =>
      new Set(
        (
          await db.any<{ step: number }>(sql`
            SELECT step FROM webhook_dispatcher.flow_steps WHERE run_key = ${runKey}`)
        ).map((r) => r.step),
      ),
    markStepDone: async (runKey, step) => {
      await db.query(sql`
        INSERT INTO webhook_dispatcher.flow_steps (run_key, step) VALUES (${runKey}, ${step})
        ON CONFLICT DO NOTHING`);
    },
    countChainEvent: async (rootEventId) =>
      (
        await db.one<{ published: number }>(sql`
          INSERT INTO webhook_dispatcher.flow_fanout (root_event_id, published) VALUES (${rootEventId}, 1)
          ON CONFLICT (root_event_id) DO UPDATE SET published = webhook_dispatcher.flow_fanout.published + 1
          RETURNING published`)
      ).published,
  };
}

export interface FlowRunDeps extends OutboundDeps {
  readonly runs: FlowRunTables;
  /** Which workspaces may raise each plugin event (the plugin's chain). */
  readonly pluginEvents: PluginEventScopes;
  readonly events: EventPublisher;
  /** Flow http actions go through the receivers' circuits, as deliveries do. */
  readonly breaker: CircuitBreaker;
  /** How many events flows may publish in the chain one event starts. */
  readonly flowEventBudget: number;
  readonly metrics: Pick<WebhookMetrics, "flowEventsOverBudget">;
  readonly log: Logger;
}

/**
 * Counts one more event published in a chain; false when the chain's budget is spent (the event is then not
 * published). A step run again after a failure counts again: the budget errs on the side of fewer events.
 */
async function spendBudget(deps: FlowRunDeps, rootEventId: string): Promise<boolean> {
  return (await deps.runs.countChainEvent(rootEventId)) <= deps.flowEventBudget;
}

/** `{{event}}`, `{{eventId}}`, `{{workspaceKey}}`, `{{occurredAtUtc}}`, `{{data.a.b}}`; unknown: empty. */
export function fill(template: string, p: FlowRunPayload): string {
  return template.replace(/\{\{\s*([\w.-]{1,200})\s*\}\}/g, (_, name: string) => {
    const top: Record<string, unknown> = {
      event: p.event,
      eventId: p.eventId,
      workspaceKey: p.workspaceKey ?? "",
      occurredAtUtc: p.occurredAtUtc,
    };
    const value: unknown = name.startsWith("data.")
      ? name
          .slice(5)
          .split(".")
          .reduce<unknown>(
            (v, k) => (v !== null && typeof v === "object" ? (v as Record<string, unknown>)[k] : undefined),
            p.data,
          )
      : top[name];
    if (typeof value === "string") return value;
    if (typeof value === "number" || typeof value === "boolean") return String(value);
    return value === undefined || value === null ? "" : JSON.stringify(value);
  });
}

/**
 * Publishes an event a flow raises (a publish or a notify action) as one more of its chain: with the next
 * depth and the chain's root, and only while the chain's budget lasts (otherwise dropped, logged, counted).
 */
async function publishInChain(
  deps: FlowRunDeps,
  p: FlowRunPayload,
  eventId: string,
  eventName: string,
  data: unknown,
): Promise<void> {
  const root = p.rootEventId ?? p.eventId;
  if (!(await spendBudget(deps, root))) {
    deps.metrics.flowEventsOverBudget.inc();
    deps.log.warn(
      { flowId: p.flowId, rootEventId: root, eventName, budget: deps.flowEventBudget },
      "a flow's event was dropped: the chain of flows its first event started has spent its budget",
    );
    return;
  }
  await deps.events.publish(eventName, p.workspaceKey, data, {
    eventId,
    flowDepth: p.depth + 1,
    flowRoot: root,
    source: EventSource.flow(p.flowId),
  });
}

/**
 * The run as placeholders see it: the event's data masked, so `{{data.password}}`
 * cannot copy a sensitive value into a notification, a new event's field or its name.
 */
async function maskedRun(deps: FlowRunDeps, p: FlowRunPayload): Promise<FlowRunPayload> {
  return { ...p, data: await shownData(deps, p.data, false) };
}

function fillData(data: Record<string, unknown>, p: FlowRunPayload): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(data).map(([k, v]) => [k, typeof v === "string" ? fill(v, p) : v]),
  );
}

async function runAction(deps: FlowRunDeps, p: FlowRunPayload, action: StoredAction, stepKey: string) {
  const id = derivedUuid(stepKey);
  switch (action.type) {
    case "http": {
      const data = await shownData(deps, p.data, action.includeSensitiveData === true);
      const body = Buffer.from(
        JSON.stringify({
          event: p.event,
          eventId: p.eventId,
          workspaceKey: p.workspaceKey,
          occurredAtUtc: p.occurredAtUtc,
          flowId: p.flowId,
          data,
        }),
      );
      const headers: Record<string, string> = {
        "content-type": "application/json",
        "user-agent": "svc-flows/1",
        [WebhookHeader.Event]: p.event,
        [WebhookHeader.Delivery]: id,
        "x-svc-flow": p.flowId,
      };
      if (action.secretEncrypted !== undefined) {
        headers[WebhookHeader.Signature] = signature(deps.secrets.open(action.secretEncrypted), body);
      }
      const url = new URL(action.url);
      // The receiver's circuit, shared with deliveries to the same origin from the same workspace: an
      // open circuit defers the run (the steps done stay done) without spending an attempt.
      const receiver = receiverKey(p.workspaceKey, url.origin);
      const trial = await admitThroughCircuit(deps.breaker, receiver);
      let response: Awaited<ReturnType<typeof postJson>>;
      try {
        response = await postJson(deps, url, body, headers);
      } catch (error) {
        // A refused target is not the receiver's failure.
        if (!(error instanceof PermanentJobError)) await recordOnCircuit(deps, receiver, false, trial);
        throw error;
      }
      const succeeded = response.status >= 200 && response.status < 300;
      await recordOnCircuit(deps, receiver, succeeded, trial);
      // The origin only: the path and query can hold the receiver's token, and the error is shown to
      // every job reader, in the dead-letter event and its notifications.
      if (!succeeded) throw new Error(`${url.origin} answered ${response.status}`);
      return;
    }
    case "publish":
      // Checked again when it runs: a flow stored before the rule, or a plugin taken out of the chain since.
      if (!mayPublish(action.eventName, (name) => deps.pluginEvents.mayRaise(name, p.workspaceKey))) {
        throw new PermanentJobError(
          `a flow may not publish '${action.eventName}': only '${FLOW_EVENT_PREFIX}' names and plugins' events`,
        );
      }
      await publishInChain(
        deps,
        p,
        id,
        action.eventName,
        action.data === undefined ? p.data : fillData(action.data, await maskedRun(deps, p)),
      );
      return;
    case "notify": {
      const shown = await maskedRun(deps, p);
      const notification: PlatformEventData["flow.notification"] = {
        flowId: p.flowId,
        title: fill(action.title, shown).slice(0, 500),
        detail: action.detail === undefined ? null : fill(action.detail, shown).slice(0, 2_000),
        permission: action.permission ?? DEFAULT_NOTIFY_PERMISSION,
        trigger: { event: p.event, eventId: p.eventId },
      };
      await publishInChain(deps, p, id, FLOW_NOTIFICATION_EVENT, notification);
      return;
    }
  }
}

export async function runFlow(deps: FlowRunDeps, job: ClaimedJob<FlowRunPayload>): Promise<void> {
  const p = job.payload;
  // A flow disabled or deleted since the event matched runs no more actions.
  if ((await deps.runs.flowIsActive(p.flowId)) !== true) return;
  await deferWhilePaused(deps, p.workspaceKey);
  const runKey = `${p.eventId}:${p.flowId}`;
  const done = await deps.runs.doneSteps(runKey);
  for (const [step, action] of p.actions.entries()) {
    if (done.has(step)) continue;
    await runAction(deps, p, action, `${runKey}:${step}`);
    await deps.runs.markStepDone(runKey, step);
  }
}

/** Forgets the steps of runs older than a week (a run is retried for minutes, not days). */
export async function pruneFlowSteps(db: Db): Promise<void> {
  await db.query(sql`
    DELETE FROM webhook_dispatcher.flow_steps WHERE completed_at < now() - interval '7 days'`);
  await db.query(sql`
    DELETE FROM webhook_dispatcher.flow_fanout WHERE created_at < now() - interval '7 days'`);
}
