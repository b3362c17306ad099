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

/**
 * Node's flags for the services, as the image's entrypoint sets them (deploy/Dockerfile): a 4 MB young
 * generation keeps an idle service's resident memory about 25 MB lower (start-up garbage, the route
 * schemas' compilation above all, no longer fills 16 MB semi-spaces).
 */
export const SERVICE_NODE_FLAGS = ["--max-semi-space-size=4"];
