import { randomUUID } from "node:crypto";
import { createPrivateKey } from "node:crypto";

import { TOKEN_AUDIENCE } from "@svc/access";
import { SignJWT } from "jose";
import { inject } from "vitest";

/** The run's signing key, the one the test stack's rbac signs with (see global-setup.ts). */
let cachedKey: ReturnType<typeof createPrivateKey> | undefined;
const key = () => (cachedKey ??= createPrivateKey(inject("svcTest").jwtSigningKey));

export interface MintOptions {
  readonly sub?: string;
  readonly scope?: "platform" | "workspace";
  readonly workspaceKey?: string;
  readonly permissions?: string[];
  readonly roles?: string[];
  readonly sid?: string;
  /** Seconds from now; negative for an expired token. */
  readonly expiresIn?: number;
  readonly issuer?: string;
}

/**
 * Mints an access token with the run's signing key, the one the test stack's rbac uses, for guard
 * tests that need arbitrary claims. Sign-in itself is tested through POST /api/auth/login.
 */
export function mintToken(o: MintOptions = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    ...(o.scope ? { svc_scope: o.scope } : {}),
    ...(o.workspaceKey ? { workspace_key: o.workspaceKey } : {}),
    permission: o.permissions ?? [],
    role: o.roles ?? [],
    sid: o.sid ?? randomUUID(),
  })
    .setProtectedHeader({ alg: "ES256", typ: "JWT" })
    .setSubject(o.sub ?? randomUUID())
    .setIssuer(o.issuer ?? "svc")
    .setAudience(TOKEN_AUDIENCE)
    .setIssuedAt(now - 60)
    .setExpirationTime(now + (o.expiresIn ?? 600))
    .sign(key());
}
