/** rbac's settings: the token-signing key and roles from configuration. */
import { type ConfigOf, defineSettings, DEVELOPMENT_JWT_SIGNING_KEY, setting } from "@svc/config";

import { DEFAULT_PASSWORD_COST } from "./passwords.js";

const SIGNING_KEY = "BackendHost:JwtSigningKey";
const PASSWORD_COST = "BackendHost:PasswordHashCost";
/** The lowest cost a test or development stack may ask for (a hash in about a millisecond). */
const MIN_TEST_PASSWORD_COST = 10;
/** 2^17 KiB = 128 MiB per hash, OWASP's recommendation for scrypt: the most one sign-in may take. */
const MAX_PASSWORD_COST = 17;

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
    passwordHashCost: setting.int(
      PASSWORD_COST,
      DEFAULT_PASSWORD_COST,
      MIN_TEST_PASSWORD_COST,
      MAX_PASSWORD_COST,
      "log2 of scrypt's N for passwords set from now on (memory per hash: 2^cost KiB; 15 takes 32 MiB); below 15 only with NODE_ENV development or test; an existing hash is renewed at this cost at its user's next sign-in",
    ),
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
    const c = config as {
      nodeEnv: string;
      backendHost: { jwtSigningKeyIsDefault: boolean; passwordHashCost: number };
    };
    // The built-in signing key is for development only; tests and production bring their own.
    if (c.nodeEnv !== "development" && c.backendHost.jwtSigningKeyIsDefault) {
      problems.push(
        `BackendHost__JwtSigningKey: must be set when NODE_ENV is ${c.nodeEnv} (the built-in development key everyone knows is refused unless NODE_ENV=development is set explicitly; an unset NODE_ENV means production)`,
      );
    }
    // A cheap hash makes tests fast and a stolen table easy to crack: never in production.
    const cost = c.backendHost.passwordHashCost;
    if (cost < DEFAULT_PASSWORD_COST && c.nodeEnv !== "development" && c.nodeEnv !== "test") {
      problems.push(
        `BackendHost__PasswordHashCost: ${cost} is below ${DEFAULT_PASSWORD_COST}, allowed only when NODE_ENV is development or test (NODE_ENV is ${c.nodeEnv})`,
      );
    }
  },
});

/** The configuration this service reads: the platform's settings and its own. */
export type RbacConfig = ConfigOf<typeof rbacSettings>;
