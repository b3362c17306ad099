/** The webhook dispatcher's settings: the key sealing stored secrets, target policy, timeouts, circuits. */
import { changeable, type ConfigOf, defineSettings, DEVELOPMENT_SECRETS_KEY, setting } from "@svc/config";

const SECRETS_KEY = "BackendHost:SecretsEncryptionKey";

export const webhookSettings = defineSettings({
  owner: "webhook-dispatcher",
  top: {},
  backendHost: {
    secretsEncryptionKey: setting.string(
      SECRETS_KEY,
      DEVELOPMENT_SECRETS_KEY,
      "32 random bytes (base64) sealing stored secrets (webhook secrets); required unless `development`",
      {
        secret: true,
        defaultText: "built-in development key",
        check: (v) => (Buffer.from(v, "base64").length === 32 ? null : "expected 32 bytes, base64-encoded"),
      },
    ),
    secretsEncryptionKeyIsDefault: setting.custom({
      name: SECRETS_KEY,
      doc: "",
      defaultText: "",
      secret: false,
      hidden: true,
      read: (r) => r.optionalString(SECRETS_KEY) === null,
    }),
    webhookAllowedNetworks: setting.list(
      "BackendHost:WebhookAllowedNetworks",
      "networks (CIDR) webhook targets may reach although private or loopback (development, tests)",
    ),
    webhookTimeoutMs: changeable(
      setting.int(
        "BackendHost:WebhookTimeoutMs",
        10_000,
        100,
        120_000,
        "time limit of one delivery attempt (and of a flow's http action; changeable at run time)",
      ),
    ),
    webhookMaxResponseBytes: changeable(
      setting.int(
        "BackendHost:WebhookMaxResponseBytes",
        65_536,
        0,
        10_485_760,
        "how much of a receiver's answer is read, the rest is discarded (changeable at run time)",
      ),
    ),
    webhookSecretOverlapSeconds: setting.int(
      "BackendHost:WebhookSecretOverlapSeconds",
      86_400,
      0,
      2_592_000,
      "after a secret rotation, how long deliveries are signed with the old secret too (a second `v1,` entry) unless the request says otherwise",
    ),
    webhookDisableAfterFailingSeconds: setting.int(
      "BackendHost:WebhookDisableAfterFailingSeconds",
      432_000,
      0,
      7_776_000,
      "a subscription every delivery of which has failed for this long is turned off (webhook.disabled, operators notified); 0 never",
    ),
    webhookDisableAfterFailures: setting.int(
      "BackendHost:WebhookDisableAfterFailures",
      0,
      0,
      1_000_000,
      "a subscription whose last this many delivery attempts all failed is turned off (webhook.disabled, operators notified); 0 never (the period above still applies)",
    ),
    webhookRecoveryPageSize: setting.int(
      "BackendHost:WebhookRecoveryPageSize",
      100,
      1,
      10_000,
      "failed deliveries a recovery (POST /api/webhooks/{id}/recover) queues again per second",
    ),
    webhookDeliveryLogDays: setting.int(
      "BackendHost:WebhookDeliveryLogDays",
      30,
      1,
      3_650,
      "days the delivery log keeps a delivery and its attempts (GET /api/webhooks/{id}/deliveries); swept at start and hourly, in batches",
    ),
    maxFlowsPerWorkspace: setting.int(
      "BackendHost:MaxFlowsPerWorkspace",
      50,
      1,
      10_000,
      "flows one workspace may have (platform flows count as one more workspace); creating one more is a 409",
    ),
    flowEventBudget: setting.int(
      "BackendHost:FlowEventBudget",
      100,
      1,
      100_000,
      "events the flows may publish (publish and notify actions) in the chain one event starts; the rest are dropped and counted",
    ),
    pausedWorkspaceRetryMs: setting.int(
      "BackendHost:PausedWorkspaceRetryMs",
      30_000,
      100,
      600_000,
      "how often a delivery or flow run of a turned-off workspace or a suspended tenant looks again whether it may go (it waits, spending no attempt)",
    ),
    webhookCircuitFailureThreshold: setting.int(
      "BackendHost:WebhookCircuitFailureThreshold",
      5,
      1,
      1_000,
      "consecutive failures of one receiver that open its circuit",
    ),
    webhookCircuitOpenMs: setting.int(
      "BackendHost:WebhookCircuitOpenMs",
      30_000,
      100,
      3_600_000,
      "how long an open circuit stays open before a trial delivery",
    ),
  },
  check(config, problems) {
    const c = config as { nodeEnv: string; backendHost: { secretsEncryptionKeyIsDefault: boolean } };
    if (c.nodeEnv !== "development" && c.backendHost.secretsEncryptionKeyIsDefault) {
      problems.push(
        `BackendHost__SecretsEncryptionKey: must be set when NODE_ENV is ${c.nodeEnv} (32 random bytes, base64; the built-in development key is refused unless NODE_ENV=development is set explicitly)`,
      );
    }
  },
});

/** The configuration this service reads: the platform's settings and its own. */
export type WebhookConfig = ConfigOf<typeof webhookSettings>;
