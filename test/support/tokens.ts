import { createPrivateKey, type KeyObject } from "node:crypto";

import { inject } from "vitest";

import { type MintOptions, signToken } from "./sign.js";

export type { MintOptions };

/** The run's signing key, the one the test stack's rbac signs with (see global-setup.ts). */
let cachedKey: KeyObject | undefined;

/**
 * Mints an access token with the run's signing key, the one the test stack's rbac uses, for guard tests
 * that need arbitrary claims. Sign-in itself is tested through POST /api/auth/login.
 */
export function mintToken(o: MintOptions = {}): Promise<string> {
  cachedKey ??= createPrivateKey(inject("svcTest").jwtSigningKey);
  return signToken(cachedKey, o);
}
