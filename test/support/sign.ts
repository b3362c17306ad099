import { createPrivateKey, type KeyObject, randomUUID } from "node:crypto";

import { TOKEN_AUDIENCE } from "@svc/access";
import { SignJWT } from "jose";

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

/** Signs an access token with arbitrary claims, as rbac would with `key` (a PKCS#8 PEM or a key object). */
export function signToken(key: string | KeyObject, o: MintOptions = {}): Promise<string> {
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
    .sign(typeof key === "string" ? createPrivateKey(key) : key);
}
