/**
 * Who is calling: a bearer token (ES256 JWT issued by rbac, verified against its JWKS) or the break-glass
 * API key (`X-Svc-Api-Key`, role host.api, platform scope, only the grants given to host.api).
 *
 * Verified tokens are cached until they expire, so the signature is checked once per token, not once per
 * request; revocation is checked on every request against the replica's revocation list.
 */
import { createHash, timingSafeEqual } from "node:crypto";

import { type AccessClaims, type RevocationList, SystemRole, TOKEN_AUDIENCE } from "@svc/access";
import type { Bus, Principal } from "@svc/bus";
import { DEVELOPMENT_API_KEY } from "@svc/config";
import {
  type MessageClient,
  messageClient,
  onBroadcast,
  rbacBroadcasts,
  rbacMessages,
  type WorkspaceStates,
} from "@svc/contracts";
import { ErrorCode, SvcError, UnauthenticatedError } from "@svc/errors";
import type { Logger } from "@svc/observability";
import { growingLru } from "@svc/runtime";
import { createLocalJWKSet, jwtVerify } from "jose";

import type { GatewayConfig } from "../settings.js";
import { PinnedKeys } from "./jwks-pin.js";

type KeySet = ReturnType<typeof createLocalJWKSet>;

interface CachedToken {
  readonly principal: Principal;
  readonly sessionId: string;
  readonly expiresAtMs: number;
}

const sha256 = (value: string) => createHash("sha256").update(value).digest();

function stringArray(value: unknown): string[] | null {
  return Array.isArray(value) && value.every((v) => typeof v === "string") ? value : null;
}

export class Authenticator {
  private keySet: KeySet | undefined;
  private keySetLoading: Promise<KeySet> | undefined;
  private readonly tokens = growingLru<string, CachedToken>(50_000);
  private readonly apiKeyDigests: Buffer[];
  private hostApiGrants: { permissions: readonly string[]; atMs: number } | undefined;
  /** Advanced by every host.api change: a grants fetch that straddles one is not cached. */
  private grantsGeneration = 0;
  private lastKeyRefreshMs = 0;
  private readonly pinned = new PinnedKeys();
  private readonly rbac: MessageClient<typeof rbacMessages>;

  constructor(
    bus: Bus,
    private readonly config: GatewayConfig,
    private readonly revocations: RevocationList,
    /** Refuses workspace sessions of a deactivated workspace or a suspended tenant. */
    private readonly states?: WorkspaceStates,
    private readonly log?: Logger,
  ) {
    const b = config.backendHost;
    const keys =
      b.apiKeys.length > 0 ? b.apiKeys : config.nodeEnv === "development" ? [DEVELOPMENT_API_KEY] : [];
    this.apiKeyDigests = b.enableBootstrapApiKeys ? keys.map(sha256) : [];
    this.rbac = messageClient(bus, rbacMessages);
    onBroadcast(bus, rbacBroadcasts["roles.changed"], ({ role }) => {
      if (role === SystemRole.HostApi) {
        this.hostApiGrants = undefined;
        this.grantsGeneration++;
      }
    });
  }

  /**
   * The public keys, fetched from rbac once and again when a token names a key we do not know; a known key
   * id keeps its first material (pinned: a reply that changes it is reported, not believed).
   */
  async jwks(refresh = false): Promise<KeySet> {
    if (this.keySet !== undefined && !refresh) return this.keySet;
    this.keySetLoading ??= this.rbac
      .request("keys.jwks", {})
      .then((jwks) => {
        const { keys, conflicts } = this.pinned.accept(jwks);
        if (conflicts.length > 0) {
          this.log?.error(
            { kids: conflicts },
            "a JWKS reply changed the key of a known key id: kept the first (a spoofed reply?)",
          );
        }
        this.keySet = createLocalJWKSet(keys);
        return this.keySet;
      })
      .finally(() => {
        this.keySetLoading = undefined;
      });
    return this.keySetLoading;
  }

  /** Returns the principal, or null when the request carries no credentials at all. */
  async authenticate(
    authorization: string | undefined,
    apiKey: string | undefined,
  ): Promise<Principal | null> {
    let principal: Principal;
    if (authorization !== undefined) principal = (await this.fromToken(bearerToken(authorization))).principal;
    else if (apiKey !== undefined) principal = await this.fromApiKey(apiKey);
    else return null;
    await this.states?.check(principal);
    return principal;
  }

  /**
   * The session a bearer token belongs to (for signing out): its id and principal, or null without a
   * bearer token. A token that is not valid (or revoked) is refused as for any route.
   */
  async session(
    authorization: string | undefined,
  ): Promise<{ principal: Principal; sessionId: string } | null> {
    if (authorization === undefined) return null;
    const { principal, sessionId } = await this.fromToken(bearerToken(authorization));
    return { principal, sessionId };
  }

  /** The token's verified claims (cached until it expires), unless its session is revoked. */
  private async fromToken(token: string): Promise<CachedToken> {
    const now = Date.now();
    let cached = this.tokens.get(token);
    if (cached === undefined || cached.expiresAtMs <= now) {
      cached = await this.verify(token);
      this.tokens.set(token, cached);
    }
    if (!this.revocations.ready) {
      throw new SvcError(ErrorCode.ServiceUnavailable, "Session revocations are not loaded yet.");
    }
    if (this.revocations.isRevoked(cached.sessionId))
      throw new UnauthenticatedError("The session has been revoked.");
    return cached;
  }

  private async verify(token: string): Promise<CachedToken> {
    const options = {
      algorithms: ["ES256"],
      issuer: this.config.backendHost.jwtIssuer,
      audience: TOKEN_AUDIENCE,
      clockTolerance: 5,
    };
    let payload: Record<string, unknown>;
    try {
      ({ payload } = await jwtVerify(token, await this.jwks(), options));
    } catch (error) {
      if (error instanceof SvcError) throw error;
      const code = (error as { code?: string }).code;
      if (code !== "ERR_JWKS_NO_MATCHING_KEY") {
        throw new UnauthenticatedError(
          code === "ERR_JWT_EXPIRED" ? "The access token has expired." : "The access token is not valid.",
        );
      }
      // An unknown key id may mean rbac has a new key: refetch, but at most every 30 s, so tokens with
      // made-up key ids cannot drive a request to rbac each.
      const now = Date.now();
      if (now - this.lastKeyRefreshMs < 30_000)
        throw new UnauthenticatedError("The access token is not valid.");
      this.lastKeyRefreshMs = now;
      const keys = await this.jwks(true); // a 503 from rbac surfaces as such
      try {
        ({ payload } = await jwtVerify(token, keys, options));
      } catch {
        throw new UnauthenticatedError("The access token is not valid.");
      }
    }
    const claims = payload as Partial<AccessClaims> & { exp?: number };
    const permissions = stringArray(claims.permission);
    const roles = stringArray(claims.role);
    if (
      typeof claims.sub !== "string" ||
      typeof claims.sid !== "string" ||
      !permissions ||
      !roles ||
      typeof claims.exp !== "number"
    ) {
      throw new UnauthenticatedError("The access token is not valid.");
    }
    const scope =
      claims.svc_scope === "platform" || claims.svc_scope === "workspace" ? claims.svc_scope : null;
    const workspaceKey = typeof claims.workspace_key === "string" ? claims.workspace_key : null;
    return {
      principal: Object.freeze({
        subject: claims.sub,
        // A workspace scope without its workspace reaches nothing.
        scope: scope === "workspace" && workspaceKey === null ? null : scope,
        workspaceKey,
        permissions: Object.freeze(permissions),
        roles: Object.freeze(roles),
        // Shown beside the user id where actions are recorded (the plugin audit).
        ...(typeof claims.name === "string" ? { name: claims.name } : {}),
      }),
      sessionId: claims.sid,
      expiresAtMs: claims.exp * 1000,
    };
  }

  private async fromApiKey(presented: string): Promise<Principal> {
    const b = this.config.backendHost;
    const digest = sha256(presented);
    // Compare against every configured key in constant time, without stopping at the first match.
    let matched = false;
    for (const key of this.apiKeyDigests) matched = timingSafeEqual(digest, key) || matched;
    if (!matched) throw new UnauthenticatedError("The API key is not valid.");
    if (b.bootstrapApiKeysExpireAtUtc !== null && Date.now() >= b.bootstrapApiKeysExpireAtUtc.getTime()) {
      throw new UnauthenticatedError("The API key has expired.");
    }
    return {
      // Each key its own identity: audit entries and Idempotency-Keys tell keys apart.
      // A prefix of the key's SHA-256 names it without revealing it.
      subject: `api-key:${digest.toString("hex").slice(0, 16)}`,
      scope: "platform",
      workspaceKey: null,
      permissions: await this.hostApiPermissions(),
      roles: [SystemRole.HostApi],
    };
  }

  /** host.api's grants, cached for five seconds and dropped at once when the role changes. */
  private async hostApiPermissions(): Promise<readonly string[]> {
    const now = Date.now();
    if (this.hostApiGrants === undefined || now - this.hostApiGrants.atMs > 5_000) {
      const generation = this.grantsGeneration;
      const { permissions } = await this.rbac.request("roles.grants", { role: SystemRole.HostApi });
      if (generation !== this.grantsGeneration) return permissions;
      this.hostApiGrants = { permissions, atMs: now };
    }
    return this.hostApiGrants.permissions;
  }
}

/** The token of an `Authorization: Bearer <token>` header, or a 401 naming the expected form. */
function bearerToken(authorization: string): string {
  const match = /^Bearer\s+([A-Za-z0-9._~+/=-]+)$/i.exec(authorization.trim());
  if (!match?.[1]) throw new UnauthenticatedError("The Authorization header must be 'Bearer <token>'.");
  return match[1];
}
