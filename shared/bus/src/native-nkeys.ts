/**
 * NATS nkeys signed by Node's own Ed25519 (OpenSSL) instead of @nats-io/nkeys' pure-JavaScript one.
 * The library derives the public key again on every `getPublicKey` and `sign` (a scalar multiplication in
 * JavaScript each, a few milliseconds apiece), so minting one plugin user took about 24 ms; here the key
 * is parsed once and signing costs microseconds. The seeds, public keys and signatures are the library's
 * formats exactly (its codec encodes them), so what this signs verifies with any nkeys implementation.
 */
import { createPrivateKey, createPublicKey, type KeyObject, randomBytes, sign, verify } from "node:crypto";

import { type KeyPair, NKeysError, NKeysErrorCode, Prefix } from "@nats-io/nkeys";
// The codec (base32 with the role prefix and a CRC-16) is not re-exported by the package's entry point.
import { Codec } from "@nats-io/nkeys/lib/codec.js";

/** DER prefix of a PKCS #8 Ed25519 private key; the 32-byte seed follows it (RFC 8410). */
const PKCS8_ED25519 = Buffer.from("302e020100300506032b657004220420", "hex");
/** DER prefix of an SPKI Ed25519 public key; the 32-byte key follows it. */
const SPKI_ED25519_LENGTH = 12;

const text = new TextDecoder();

class NativeKeyPair implements KeyPair {
  private seed: Uint8Array | undefined;
  private readonly privateKey: KeyObject;
  private readonly publicKey: KeyObject;
  private readonly publicString: string;
  private readonly rawPublic: Uint8Array;

  constructor(seed: Uint8Array) {
    const { buf, prefix } = Codec.decodeSeed(seed);
    this.seed = seed;
    this.privateKey = createPrivateKey({
      key: Buffer.concat([PKCS8_ED25519, buf]),
      format: "der",
      type: "pkcs8",
    });
    this.publicKey = createPublicKey(this.privateKey);
    this.rawPublic = new Uint8Array(
      this.publicKey.export({ format: "der", type: "spki" }).subarray(SPKI_ED25519_LENGTH),
    );
    this.publicString = text.decode(Codec.encode(prefix, this.rawPublic));
  }

  private live(): Uint8Array {
    if (this.seed === undefined) throw new NKeysError(NKeysErrorCode.ClearedPair);
    return this.seed;
  }

  getPublicKey(): string {
    this.live();
    return this.publicString;
  }

  getPrivateKey(): Uint8Array {
    const raw = Codec.decodeSeed(this.live()).buf;
    return Codec.encode(Prefix.Private, new Uint8Array([...raw, ...this.rawPublic]));
  }

  getSeed(): Uint8Array {
    return this.live();
  }

  getRawSeed(): Uint8Array {
    return Codec.decodeSeed(this.live()).buf;
  }

  sign(input: Uint8Array): Uint8Array {
    this.live();
    return new Uint8Array(sign(null, input, this.privateKey));
  }

  verify(input: Uint8Array, sig: Uint8Array): boolean {
    this.live();
    return verify(null, input, this.publicKey, sig);
  }

  /** The private key as PKCS #8 PEM: what a process without the nkeys codec signs with (node:crypto). */
  privateKeyPem(): string {
    this.live();
    return this.privateKey.export({ format: "pem", type: "pkcs8" }).toString();
  }

  clear(): void {
    this.seed?.fill(0);
    this.seed = undefined;
  }

  seal(): Uint8Array {
    throw new NKeysError(NKeysErrorCode.InvalidNKeyOperation);
  }

  open(): Uint8Array | null {
    throw new NKeysError(NKeysErrorCode.InvalidNKeyOperation);
  }
}

export type { NativeKeyPair };

/** A key pair from an nkey seed (`SU…`, `SA…`), signing natively. */
export function nativeFromSeed(seed: Uint8Array | string): NativeKeyPair {
  return new NativeKeyPair(typeof seed === "string" ? new TextEncoder().encode(seed) : seed);
}

/** A new nkey of a role (`Prefix.Account`: `A…`, `Prefix.Operator`: `O…`), signing natively. */
export function nativeCreatePair(role: Prefix): NativeKeyPair {
  return new NativeKeyPair(Codec.encodeSeed(role, randomBytes(32)));
}

/** A new user nkey (`U…`), signing natively. */
export function nativeCreateUser(): NativeKeyPair {
  return nativeCreatePair(Prefix.User);
}
