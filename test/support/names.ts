import type { SecureBus } from "./secure-bus.js";

/** What the global setup hands every test file. */
export interface TestEnvironment {
  readonly runId: string;
  /** URL of the `postgres` database of the server under test (for CREATE/DROP DATABASE). */
  readonly adminUrl: string;
  readonly natsUrl: string;
  /** Migrated template that each test file clones. */
  readonly templateDatabase: string;
  /** This run's ES256 token-signing key (PKCS#8 PEM): outside development the built-in one is refused. */
  readonly jwtSigningKey: string;
  /** This run's key for stored secrets (32 bytes, base64). */
  readonly secretsEncryptionKey: string;
  /** The run's secure nats-server (ADR 0012); absent when the suite runs on an open one (SVC_TEST_BUS=open). */
  readonly bus?: SecureBus;
}

export const DB_PREFIX = "svc_test_";
export const STREAM_PREFIX = "SVC_EVENTS_T";
