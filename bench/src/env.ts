import { generateKeyPairSync, randomBytes } from "node:crypto";

/**
 * The environment of a benchmark's services: production mode (as deployed), so fresh keys for this run
 * (production refuses the built-in development ones), its own database, subject prefix and stream.
 */
export function productionEnv(o: { databaseUrl: string; natsUrl: string; prefix: string; stream: string }) {
  return {
    NODE_ENV: "production",
    LOG_LEVEL: "warn",
    DATABASE_URL: o.databaseUrl,
    NATS_URL: o.natsUrl,
    SVC_SUBJECT_PREFIX: o.prefix,
    SVC_EVENTS_STREAM: o.stream,
    BackendHost__JwtSigningKey: generateKeyPairSync("ec", { namedCurve: "P-256" })
      .privateKey.export({ type: "pkcs8", format: "pem" })
      .toString(),
    BackendHost__SecretsEncryptionKey: randomBytes(32).toString("base64"),
  };
}

export { SERVICE_NODE_FLAGS } from "../../scripts/lib/stack.js";
