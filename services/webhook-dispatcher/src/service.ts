import { createEventPublisher, ensureBucket, EventSource, followEvents } from "@svc/bus";
import {
  followContributions,
  publishPlatformEvent,
  quietUnlessUp,
  type RouteImplementation,
  webhookDispatcherContract,
  WorkspaceStates,
} from "@svc/contracts";
import { wakeJobsWaitingOn } from "@svc/jobs";
import { circuitBucket, defineService, startHousekeeping, throttleBucket } from "@svc/runtime";

import { CIRCUIT_STATE_TTL_MS, CircuitBreaker } from "./circuit-breaker.js";
import { attemptTables, deliver, parseReceiverKey } from "./deliver.js";
import {
  deliveryTables,
  getDelivery,
  getRecovery,
  listDeliveries,
  recoverPage,
  resendDelivery,
  settleAllStrandedDeliveries,
  startRecovery,
} from "./deliveries.js";
import { DeliveryLog, sweepDeliveryLog } from "./delivery-log.js";
import { EventSources } from "./event-sources.js";
import { flowRunJob, flowRunTables, pruneFlowSteps, runFlow } from "./flow-run.js";
import * as flows from "./flows.js";
import { createTargetPolicy } from "./http-client.js";
import { deliverJob, recoverJob } from "./jobs.js";
import { sensitiveFieldNames } from "./masking.js";
import { startMatcher } from "./matcher.js";
import { createWebhookMetrics } from "./metrics.js";
import { writePlatformEvents } from "./platform-events.js";
import { applyPluginContributions, PluginEventScopes } from "./plugin-contributions.js";
import { createSecretBox } from "./secrets.js";
import { webhookSettings } from "./settings.js";
import { SubscriptionCache } from "./subscription-cache.js";
import * as subs from "./subscriptions.js";
import { Throttle } from "./throttle.js";
import { forgetWorkspace } from "./workspace-deletions.js";

/** Webhook subscriptions, event matching, masking and signed delivery with retries and a circuit breaker. */
export const webhookDispatcherService = defineService(webhookDispatcherContract, {
  settings: webhookSettings,
  // A keyed write's outcome is kept in the transaction of its change.
  keyedWrites: "transaction",
  jobs: { "webhook.deliver": deliverJob, "flow.run": flowRunJob, "webhook.recover": recoverJob },
  async start({ bus, db, config, log, nc, metrics, provision, reprovision, live }) {
    const b = config.backendHost;
    const secrets = createSecretBox(b.secretsEncryptionKey);
    const allowed = createTargetPolicy(b.webhookAllowedNetworks);
    const pluginEvents = new PluginEventScopes();
    const webhookMetrics = createWebhookMetrics(metrics, () => breaker.counts());
    const subscriptionCache = new SubscriptionCache(db, () => webhookMetrics.subscriptionChanges.inc());
    // What this replica changes, its next delivery reads at once (other replicas hear the trigger).
    const subscriptions = subscriptionCache.droppingOnWrite(subs.subscriptionTables(db), [
      "setActive",
      "replace",
      "rotate",
      "remove",
    ]);
    const flowTables = flows.flowTables(db);
    const deliveries = deliveryTables(db);
    const routes: RouteImplementation<typeof webhookDispatcherContract.routes> = {
      "webhooks.create": (req) => subs.createSubscription(subscriptions, secrets, allowed, req),
      "webhooks.list": (req) => subs.listSubscriptions(subscriptions, req),
      "webhooks.put": (req) => subs.replaceSubscription(subscriptions, secrets, allowed, req),
      "webhooks.rotate-secret": (req) =>
        subs.rotateSecret(subscriptions, secrets, b.webhookSecretOverlapSeconds, req),
      "webhooks.deliveries": (req) => listDeliveries(deliveries, subscriptions, req),
      "webhooks.delivery": (req) => getDelivery(deliveries, req),
      "webhooks.resend": (req) => resendDelivery(deliveries, req),
      "webhooks.recover": (req) => startRecovery(deliveries, subscriptions, req),
      "webhooks.recovery": (req) => getRecovery(deliveries, req),
      "webhooks.circuit": (req) =>
        subs.circuitOf(subscriptions, breaker, b.webhookCircuitFailureThreshold, req),
      "webhooks.activation": (req) => subs.setActivation(subscriptions, req),
      "webhooks.delete": (req) => subs.deleteSubscription(subscriptions, req),
      "events.catalog": () => subs.eventCatalog(subscriptions),
      "flows.list": (req) => flows.listFlows(flowTables, req),
      "flows.create": (req) =>
        flows.createFlow(flowTables, secrets, allowed, pluginEvents, b.maxFlowsPerWorkspace, req),
      "flows.put": (req) => flows.replaceFlow(flowTables, secrets, allowed, pluginEvents, req),
      "flows.delete": (req) => flows.deleteFlow(flowTables, req),
    };

    const openCircuits = () =>
      ensureBucket(nc, circuitBucket(config.subjectPrefix), {
        history: 1,
        ttl: CIRCUIT_STATE_TTL_MS,
        replicas: b.natsReplicas,
      });
    // Circuit-opened events and the events flows publish.
    const circuitEvents = createEventPublisher(nc, config.subjectPrefix, EventSource.Platform);
    const breaker = new CircuitBreaker(
      await openCircuits(),
      b.webhookCircuitFailureThreshold,
      b.webhookCircuitOpenMs,
      log,
      // A trial holds the half-open circuit for longer than one attempt can take (three tries).
      b.webhookTimeoutMs * 3 + 5_000,
      // Operators who manage webhooks are notified (rbac turns the event into notifications).
      async (receiver, failures) => {
        const { workspaceKey, origin } = parseReceiverKey(receiver);
        await publishPlatformEvent(circuitEvents, "webhook.circuit-opened", null, {
          origin,
          workspaceKey,
          failures,
          openForMs: b.webhookCircuitOpenMs,
        });
      },
    );
    await breaker.start();
    reprovision("circuit bucket", async () => {
      await openCircuits();
      await breaker.restart();
    });
    // Counters of the current second only: memory storage, gone after ten seconds.
    const openThrottles = () =>
      ensureBucket(nc, throttleBucket(config.subjectPrefix), {
        history: 1,
        ttl: 10_000,
        storage: "memory",
        replicas: b.natsReplicas,
      });
    let throttles = await openThrottles();
    reprovision("throttle bucket", async () => {
      throttles = await openThrottles();
    });
    const throttle = new Throttle(() => throttles, log);
    const sensitiveFields = sensitiveFieldNames(db);
    const subscriptionChanges = subscriptionCache.listen(config.databaseUrl, log);
    // What deliveries and flow runs need; the time limit and the answer size are read per attempt: both
    // can change at run time.
    const outbound = {
      runs: flowRunTables(db),
      tables: subscriptionCache.droppingOnWrite(attemptTables(db), [
        "turnOff",
        "markAnnounced",
        "noteFailing",
        "markHealthy",
      ]),
      wakeWaiting: (waitingOn: string) => wakeJobsWaitingOn(db, waitingOn),
      subscriptions: subscriptionCache,
      throttle,
      secrets,
      breaker,
      allowed,
      sensitiveFields,
      workspaces: new WorkspaceStates(bus, log),
      flowEventBudget: b.flowEventBudget,
      log,
      pausedRetryMs: b.pausedWorkspaceRetryMs,
      pluginEvents,
      events: circuitEvents,
      get timeoutMs() {
        return live.backendHost.webhookTimeoutMs;
      },
      get maxResponseBytes() {
        return live.backendHost.webhookMaxResponseBytes;
      },
      metrics: webhookMetrics,
      deliveryLog: new DeliveryLog(db, log),
      disableAfterFailingMs: b.webhookDisableAfterFailingSeconds * 1_000,
      disableAfterFailures: b.webhookDisableAfterFailures,
    };
    // At start, then hourly, one chore after another (a failed one is logged and tried at the next turn):
    // - deliveries shown waiting on a job that ended unseen (cancelled, or its lease expired on its last
    //   attempt) are failed: at start those whose job ended within the log's days, then those that ended
    //   since the last pass began, with a margin for the clocks (the delivery-log routes settle what they
    //   show at once);
    // - the delivery log past its days, old flow steps, and rotated secrets past their overlap go.
    // At start too: a dispatcher restarted more often than hourly still prunes.
    let settleFrom = new Date(Date.now() - b.webhookDeliveryLogDays * 86_400_000);
    const chores: ReadonlyArray<readonly [string, (signal: AbortSignal) => Promise<unknown>]> = [
      [
        "could not settle deliveries whose job has ended",
        async (signal) => {
          const began = Date.now();
          await settleAllStrandedDeliveries(db, settleFrom, signal);
          if (!signal.aborted) settleFrom = new Date(began - 300_000);
        },
      ],
      [
        "could not sweep the delivery log",
        (signal) => sweepDeliveryLog(db, b.webhookDeliveryLogDays, { signal }),
      ],
      ["could not prune old flow steps", () => pruneFlowSteps(db)],
      ["could not drop rotated secrets past their overlap", () => subs.dropExpiredSecrets(db)],
    ];
    // Stopping, the chore in hand ends after its batch and the rest wait for the next start.
    const housekeeping = startHousekeeping(
      3_600_000,
      async (signal) => {
        for (const [failure, chore] of chores) {
          if (signal.aborted) return;
          await chore(signal).catch((err: unknown) => log.warn({ error: (err as Error).message }, failure));
        }
      },
      log,
      "webhook housekeeping failed",
    );
    // Installed plugins' sensitive fields and event names (and their removal on uninstall).
    const plugins = followContributions(
      bus,
      async (list, requestedAt) => {
        pluginEvents.apply(list, requestedAt);
        await applyPluginContributions(db, list);
      },
      quietUnlessUp(log),
    );
    const matcher = await startMatcher(nc, db, {
      stream: config.eventsStream,
      prefix: config.subjectPrefix,
      log,
      sources: new EventSources(await writePlatformEvents(db), pluginEvents),
      refreshPlugins: () => plugins.sync(),
      dropped: outbound.metrics.eventsDropped,
    });
    // A server that lost its store lost the consumer too: the runtime makes the stream again, this the
    // consumer (the matcher's loop re-binds to it).
    await provision("event consumer", () => matcher.ensureConsumer());
    // A deleted workspace's subscriptions, flows and delivery log go (followed durably, from every
    // deletion the stream still holds: only what was made before each deletion goes).
    const deletions = await followEvents(
      nc,
      {
        stream: config.eventsStream,
        prefix: config.subjectPrefix,
        durable: `${config.subjectPrefix}-webhook-dispatcher-workspace-deleted`,
        events: "workspace.deleted",
        from: "all",
        log,
      },
      async ({ data, occurredAt }) => {
        if (typeof data.workspaceKey !== "string") return;
        const forgotten = await forgetWorkspace(db, data.workspaceKey, occurredAt);
        if (forgotten.subscriptions + forgotten.flows + forgotten.deliveries + forgotten.jobs > 0)
          log.info(
            { workspaceKey: data.workspaceKey, ...forgotten },
            "forgot a deleted workspace's webhooks",
          );
      },
    );
    reprovision("workspace deletions consumer", () => deletions.ensure());
    return {
      routes,
      messages: {},
      jobs: {
        "webhook.deliver": {
          concurrency: 50,
          batchSize: 100,
          handler: (job) => deliver(outbound, job),
        },
        "flow.run": {
          concurrency: 20,
          batchSize: 100,
          handler: (job) => runFlow(outbound, job),
        },
        "webhook.recover": {
          concurrency: 2,
          batchSize: 2,
          handler: (job) => recoverPage(db, job, b.webhookRecoveryPageSize),
        },
      },
      // Stop taking events first; the runtime then lets running deliveries finish and releases queued ones.
      beforeDrain: async () => {
        plugins.stop();
        deletions.stop();
        await housekeeping.stop();
        await matcher.stop();
      },
      afterDrain: async () => {
        // What the last deliveries logged is written before the process ends.
        await outbound.deliveryLog.flush();
        breaker.stop();
        await subscriptionChanges.stop();
      },
    };
  },
});
