import { exportJWK, generateKeyPair } from "jose";
import { describe, expect, it } from "vitest";

import { PinnedKeys } from "./jwks-pin.js";

const key = async (kid: string) => ({
  ...(await exportJWK((await generateKeyPair("ES256")).publicKey)),
  kid,
});

describe("the gateway's pinned key set", () => {
  it("keeps a known key id's material when a reply changes it, and reports the conflict", async () => {
    const pins = new PinnedKeys();
    const real = await key("k1");
    expect(pins.accept({ keys: [real] })).toEqual({ keys: { keys: [real] }, conflicts: [] });
    const forged = await key("k1");
    const after = pins.accept({ keys: [forged] });
    expect(after.conflicts).toEqual(["k1"]);
    expect(after.keys.keys).toEqual([real]);
  });

  it("takes new key ids (rotation) and drops ids no longer listed", async () => {
    const pins = new PinnedKeys();
    const k1 = await key("k1");
    const k2 = await key("k2");
    pins.accept({ keys: [k1] });
    expect(pins.accept({ keys: [k1, k2] }).keys.keys).toEqual([k1, k2]);
    expect(pins.accept({ keys: [k2] }).keys.keys).toEqual([k2]);
  });
});
