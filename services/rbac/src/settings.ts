/** rbac's settings: the token-signing key and roles from configuration. */
import { type ConfigOf, defineSettings, DEVELOPMENT_JWT_SIGNING_KEY, setting } from "@svc/config";

const SIGNING_KEY = "BackendHost:JwtSigningKey";

export const rbacSettings = defineSettings({
  owner: "rbac",
  top: {},
  backendHost: {
    jwtSigningKey: setting.custom({
      name: SIGNING_KEY,
      doc: "PKCS#8 PEM of the ES256 token-signing key (`\\n` for line breaks); required unless `development`",
      defaultText: "built-in development key",
      secret: true,
      read: (r) => r.optionalString(SIGNING_KEY)?.replaceAll("\\n", "\n") ?? DEVELOPMENT_JWT_SIGNING_KEY,
    }),
    /** True when jwtSigningKey is the well-known development key. */
    jwtSigningKeyIsDefault: setting.custom({
      name: SIGNING_KEY,
      doc: "",
      defaultText: "",
      secret: false,
      hidden: true,
      read: (r) => r.optionalString(SIGNING_KEY) === null,
    }),
    sessionRetentionDays: setting.int(
      "BackendHost:SessionRetentionDays",
      30,
      1,
      3_650,
      "days a session is kept after it expired (a user's data export lists it meanwhile); swept hourly in batches",
    ),
    notificationRetentionDays: setting.int(
      "BackendHost:NotificationRetentionDays",
      90,
      7,
      3_650,
      "days a notification stays in its inbox, read or not, before it is deleted; swept hourly in batches",
    ),
    rbacRoles: setting.custom({
      name: "BackendHost:RbacRoles",
      doc: "extra roles and their permission keys, seeded at rbac start",
      defaultText: "none",
      secret: false,
      display: "BackendHost__RbacRoles__N__Name`, `__Permissions__M",
      read: (r): ReadonlyArray<{ readonly name: string; readonly permissions: readonly string[] }> =>
        r.roles("BackendHost:RbacRoles"),
    }),
  },
  check(config, problems) {
    const c = config as { nodeEnv: string; backendHost: { jwtSigningKeyIsDefault: boolean } };
    // The built-in signing key is for development only; tests and production bring their own.
    if (c.nodeEnv !== "development" && c.backendHost.jwtSigningKeyIsDefault) {
      problems.push(
        `BackendHost__JwtSigningKey: must be set when NODE_ENV is ${c.nodeEnv} (the built-in development key everyone knows is refused unless NODE_ENV=development is set explicitly; an unset NODE_ENV means production)`,
      );
    }
  },
});

/** The configuration this service reads: the platform's settings and its own. */
export type RbacConfig = ConfigOf<typeof rbacSettings>;
