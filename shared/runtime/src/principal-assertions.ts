/**
 * No principal taken on trust from the bus. The gateway establishes who calls (a
 * verified session token or API key) and signs that principal with a key of its own; the service that owns
 * the route verifies the signature and acts on the signed principal, never on the one in the request body
 * alone. So a NATS user that may send requests to a service (another service's, on an open bus anyone)
 * cannot make itself a superadmin by writing a principal.
 *
 * Keys: each gateway process makes an Ed25519 key pair at start and publishes the public key (a JWK, under
 * a key id of its own) in the KV bucket `<prefix>_principal_keys`, which only the gateway's NATS user may
 * write (nats-permissions.ts) and every service reads and watches. A key id once seen keeps its key for the
 * life of the process (a later, different value under it is refused and logged), like the gateway's pin on
 * rbac's key set. The private key never leaves the gateway's memory; a restarted gateway makes a new one.
 *
 * Cost: an assertion is a JWT (EdDSA) valid two minutes; the gateway signs one per principal per minute
 * (cached), a service verifies each assertion once (cached until it expires).
 */
import { createPublicKey, generateKeyPairSync, type KeyObject, randomUUID } from "node:crypto";

import type { KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import {
  ensureBucket,
  KvWatches,
  type Principal,
  type PrincipalSigner,
  type PrincipalVerifier,
} from "@svc/bus";
import { UnauthenticatedError } from "@svc/errors";
import type { Logger } from "@svc/observability";
import canonicalize from "canonicalize";
import { decodeProtectedHeader, jwtVerify, SignJWT } from "jose";

import { growingLru } from "./growing-lru.js";

/** The bucket of the gateways' public keys. */
export const principalKeysBucket = (prefix: string) => `${prefix}_principal_keys`;

/** How long an assertion is valid; the gateway re-signs a principal after half of it. */
const LIFETIME_S = 120;
/** A key not refreshed for this long is dropped by the bucket (its gateway is gone). */
const KEY_TTL_MS = 24 * 3_600_000;
const REFRESH_MS = 3_600_000;
const ISSUER = "svc-gateway";

const openBucket = (nc: NatsConnection, prefix: string, replicas: number) =>
  ensureBucket(nc, principalKeysBucket(prefix), { history: 1, ttl: KEY_TTL_MS, replicas });

/** The gateway's signer: its key pair, published; assertions cached per principal. */
export class GatewayPrincipalSigner implements PrincipalSigner {
  private readonly kid = randomUUID();
  private readonly privateKey: KeyObject;
  private readonly jwk: string;
  private readonly cache = growingLru<string, { token: string; renewAt: number }>(10_000);
  private readonly byObject = new WeakMap<Principal, { token: string; renewAt: number }>();
  private refresh: NodeJS.Timeout | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly prefix: string,
    /** BackendHost:NatsReplicas. */
    private readonly replicas: number,
  ) {
    const { privateKey, publicKey } = generateKeyPairSync("ed25519");
    this.privateKey = privateKey;
    this.jwk = JSON.stringify({ ...publicKey.export({ format: "jwk" }), kid: this.kid, alg: "EdDSA" });
  }

  /** Publishes the public key (at start, after a NATS store was lost, and hourly against the bucket's TTL). */
  async publish(): Promise<void> {
    const kv = await openBucket(this.nc, this.prefix, this.replicas);
    await kv.put(this.kid, new TextEncoder().encode(this.jwk));
    if (this.refresh === undefined) {
      this.refresh = setInterval(() => void this.publish().catch(() => undefined), REFRESH_MS);
      this.refresh.unref();
    }
  }

  stop(): void {
    clearInterval(this.refresh);
  }

  async sign(principal: Principal): Promise<string> {
    const now = Date.now();
    // A frozen principal (the gateway's, cached with its token) cannot change: its assertion is found by
    // the object itself, without writing out its canonical form at every request.
    const known = this.byObject.get(principal);
    if (known !== undefined && known.renewAt > now) return known.token;
    const key = canonicalize(principal) ?? "";
    let cached = this.cache.get(key);
    if (cached === undefined || cached.renewAt <= now) {
      const token = await new SignJWT({ principal })
        .setProtectedHeader({ alg: "EdDSA", kid: this.kid })
        .setIssuer(ISSUER)
        .setIssuedAt()
        .setExpirationTime(Math.floor(now / 1_000) + LIFETIME_S)
        .sign(this.privateKey);
      cached = { token, renewAt: now + (LIFETIME_S * 1_000) / 2 };
      this.cache.set(key, cached);
    }
    if (
      Object.isFrozen(principal) &&
      Object.isFrozen(principal.permissions) &&
      Object.isFrozen(principal.roles)
    )
      this.byObject.set(principal, cached);
    return cached.token;
  }
}

/** Every service's verifier: the gateways' keys by watch, each assertion verified once. */
export class PrincipalAssertionVerifier implements PrincipalVerifier {
  private readonly keys = new Map<string, { jwk: string; key: KeyObject }>();
  private readonly verified = growingLru<string, { principal: Principal; canonical: string; exp: number }>(
    10_000,
  );
  private kv: KV | undefined;
  private readonly watches = new KvWatches();

  constructor(
    private readonly nc: NatsConnection,
    private readonly prefix: string,
    /** BackendHost:NatsReplicas. */
    private readonly replicas: number,
    private readonly log: Logger,
  ) {}

  /** Opens the bucket and follows it (again after a NATS store was lost). */
  async start(): Promise<void> {
    const follow = this.watches.renew();
    this.kv = await openBucket(this.nc, this.prefix, this.replicas);
    await follow(this.kv, ">", (entry) => {
      if (entry.operation === "PUT") this.accept(entry.key, entry.string());
    });
  }

  stop(): void {
    this.watches.stop();
  }

  /** Takes a published key; a key id already known keeps its first key. */
  private accept(kid: string, jwk: string): KeyObject | undefined {
    const known = this.keys.get(kid);
    if (known !== undefined) {
      if (known.jwk !== jwk) {
        this.log.error({ kid }, "a gateway key id was published again with another key: refused");
      }
      return known.key;
    }
    try {
      const key = createPublicKey({ key: JSON.parse(jwk) as Record<string, string>, format: "jwk" });
      if (key.asymmetricKeyType !== "ed25519") throw new Error("not an Ed25519 key");
      this.keys.set(kid, { jwk, key });
      return key;
    } catch (error) {
      this.log.warn({ kid, error: (error as Error).message }, "an unusable gateway key was published");
      return undefined;
    }
  }

  /** A key by id: from the watch, or read at once (a gateway that started a moment ago). */
  private async keyOf(kid: string): Promise<KeyObject | undefined> {
    const known = this.keys.get(kid)?.key;
    if (known !== undefined) return known;
    const entry = await this.kv?.get(kid).catch(() => null);
    return entry?.operation === "PUT" ? this.accept(kid, entry.string()) : undefined;
  }

  async verify(assertion: string | undefined, claimed: Principal): Promise<Principal> {
    if (assertion === undefined) {
      throw new UnauthenticatedError("The request carries no principal signed by the gateway.");
    }
    const now = Date.now();
    let entry = this.verified.get(assertion);
    if (entry === undefined || entry.exp * 1_000 <= now) {
      let kid: string | undefined;
      try {
        kid = decodeProtectedHeader(assertion).kid;
      } catch {
        kid = undefined;
      }
      const key = kid === undefined ? undefined : await this.keyOf(kid);
      if (key === undefined)
        throw new UnauthenticatedError("The principal is not signed by a known gateway.");
      try {
        const { payload } = await jwtVerify<{ principal: Principal }>(assertion, key, {
          issuer: ISSUER,
          algorithms: ["EdDSA"],
        });
        const principal = payload.principal;
        entry = { principal, canonical: canonicalize(principal) ?? "", exp: payload.exp ?? 0 };
      } catch {
        throw new UnauthenticatedError("The principal's signature is not valid or has expired.");
      }
      this.verified.set(assertion, entry);
    }
    // The body's principal must be the signed one (a body rewritten under a valid assertion is refused).
    if (canonicalize(claimed) !== entry.canonical) {
      throw new UnauthenticatedError("The request's principal is not the one the gateway signed.");
    }
    return entry.principal;
  }
}
