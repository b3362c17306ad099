import { decode, encodeUser } from "@nats-io/jwt";
import { createAccount, createUser, fromPublic, fromSeed, Prefix } from "@nats-io/nkeys";
import { describe, expect, it } from "vitest";

import { nativeCreatePair, nativeCreateUser, nativeFromSeed } from "./native-nkeys.js";

describe("native nkeys", () => {
  it("derives the same public key, private key and signatures as @nats-io/nkeys from one seed", () => {
    for (const library of [createUser(), createAccount()]) {
      const native = nativeFromSeed(library.getSeed());
      expect(native.getPublicKey()).toBe(library.getPublicKey());
      expect(new TextDecoder().decode(native.getPrivateKey())).toBe(
        new TextDecoder().decode(library.getPrivateKey()),
      );
      const data = new TextEncoder().encode("a nonce from the server");
      // Ed25519 is deterministic: the same key signs the same bytes the same way.
      expect(Buffer.from(native.sign(data)).toString("hex")).toBe(
        Buffer.from(library.sign(data)).toString("hex"),
      );
      expect(native.verify(data, library.sign(data))).toBe(true);
      expect(native.verify(new TextEncoder().encode("other"), library.sign(data))).toBe(false);
    }
  });

  it("makes users the library reads back, whose signatures its public keys verify", () => {
    const user = nativeCreateUser();
    expect(user.getPublicKey()).toMatch(/^U[A-Z2-7]{55}$/);
    const again = fromSeed(user.getSeed());
    expect(again.getPublicKey()).toBe(user.getPublicKey());
    const data = new TextEncoder().encode("x");
    expect(fromPublic(user.getPublicKey()).verify(data, user.sign(data))).toBe(true);
    expect(nativeCreateUser().getPublicKey()).not.toBe(user.getPublicKey());
  });

  it("makes operators and accounts of their roles, which the library reads back", () => {
    for (const [role, letter] of [
      [Prefix.Operator, "O"],
      [Prefix.Account, "A"],
    ] as const) {
      const pair = nativeCreatePair(role);
      expect(pair.getPublicKey()).toMatch(new RegExp(`^${letter}[A-Z2-7]{55}$`));
      expect(fromSeed(pair.getSeed()).getPublicKey()).toBe(pair.getPublicKey());
    }
  });

  it("signs user JWTs that decode with the issuing account's key", async () => {
    const account = createAccount();
    const signer = nativeFromSeed(account.getSeed());
    const user = nativeCreateUser();
    const jwt = await encodeUser(
      "plugin:x",
      user,
      signer,
      { pub: { allow: ["a.b"] } },
      { exp: 2_000_000_000 },
    );
    const claims = decode<{ pub: { allow: string[] } }>(jwt);
    expect(claims.iss).toBe(account.getPublicKey());
    expect(claims.sub).toBe(user.getPublicKey());
    expect(claims.nats.pub?.allow).toEqual(["a.b"]);
    const [header, body, signature] = jwt.split(".") as [string, string, string];
    expect(
      fromPublic(account.getPublicKey()).verify(
        new TextEncoder().encode(`${header}.${body}`),
        Buffer.from(signature, "base64url"),
      ),
    ).toBe(true);
  });

  it("refuses to sign once cleared", () => {
    const user = nativeCreateUser();
    user.clear();
    expect(() => user.sign(new Uint8Array(1))).toThrow();
  });
});
