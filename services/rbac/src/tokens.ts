import { createPrivateKey, createPublicKey } from "node:crypto";

import { type AccessClaims, TOKEN_AUDIENCE } from "@svc/access";
import { calculateJwkThumbprint, exportJWK, type JWK, SignJWT } from "jose";

export interface TokenIssuer {
  readonly kid: string;
  readonly jwks: { keys: JWK[] };
  sign(claims: AccessClaims, lifetimeSeconds: number): Promise<string>;
}

/** Loads the ES256 signing key (PKCS#8 PEM) and publishes its public half as a JWK set. */
export async function createTokenIssuer(pem: string, issuer: string): Promise<TokenIssuer> {
  const privateKey = createPrivateKey(pem);
  if (privateKey.asymmetricKeyType !== "ec" || privateKey.asymmetricKeyDetails?.namedCurve !== "prime256v1") {
    throw new Error("BackendHost__JwtSigningKey must be an EC P-256 private key (ES256)");
  }
  const publicJwk = await exportJWK(createPublicKey(privateKey));
  const kid = await calculateJwkThumbprint(publicJwk);
  const jwk: JWK = { ...publicJwk, kid, alg: "ES256", use: "sig" };
  return {
    kid,
    jwks: { keys: [jwk] },
    sign(claims, lifetimeSeconds) {
      const { sub, ...rest } = claims;
      return new SignJWT({ ...rest })
        .setProtectedHeader({ alg: "ES256", kid, typ: "JWT" })
        .setSubject(sub)
        .setIssuer(issuer)
        .setAudience(TOKEN_AUDIENCE)
        .setIssuedAt()
        .setExpirationTime(`${lifetimeSeconds}s`)
        .sign(privateKey);
    },
  };
}
