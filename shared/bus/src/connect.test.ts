import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { encodeUser, fmtCreds } from "@nats-io/jwt";
import { createAccount, createUser } from "@nats-io/nkeys";
import {
  type Authenticator,
  credsAuthenticator,
  type NatsConnection,
  nkeyAuthenticator,
} from "@nats-io/transport-node";
import { afterAll, describe, expect, it } from "vitest";

import { coalesceWrites, isNatsAuthError, type NatsAuth, natsAuthOptions, parseCreds } from "./connect.js";

const dir = mkdtempSync(join(tmpdir(), "svc-tls-options-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the TLS options given to nats.js", () => {
  it("read the CA, certificate and key each time the transport reads them, so a rotated file applies at the next connect", () => {
    const file = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    const tls = natsAuthOptions({
      tls: {
        caFile: file("ca.pem", "first CA"),
        certFile: file("client.pem", "first cert"),
        keyFile: file("client.key", "first key"),
        serverName: "nats.test",
      },
    }).tls as Record<string, unknown>;
    // The transport copies every field into Node's tls.connect options at each (re)connect.
    expect({ ...tls }).toEqual({
      ca: "first CA",
      cert: "first cert",
      key: "first key",
      servername: "nats.test",
    });
    file("ca.pem", "rotated CA");
    file("client.pem", "rotated cert");
    file("client.key", "rotated key");
    expect({ ...tls }).toEqual({
      ca: "rotated CA",
      cert: "rotated cert",
      key: "rotated key",
      servername: "nats.test",
    });
  });

  it("name no file the transport would read itself (on libuv's thread pool), and are absent without TLS", () => {
    const tls = natsAuthOptions({ tls: { caFile: join(dir, "ca.pem") } }).tls as Record<string, unknown>;
    expect(Object.keys(tls)).toEqual(["ca"]);
    expect(natsAuthOptions({ token: "t" }).tls).toBeUndefined();
  });
});

/** The one authenticator `natsAuthOptions` gives nats.js for `auth`. */
function authenticatorOf(auth: NatsAuth): Authenticator {
  const { authenticator } = natsAuthOptions(auth);
  if (typeof authenticator !== "function") throw new Error("no single authenticator");
  return authenticator;
}

/** What `act` throws (undefined when it throws nothing). */
function thrownBy(act: () => unknown): unknown {
  try {
    act();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe("the credentials given to nats.js", () => {
  it("answer the server's nonce with a .creds file exactly as nats.js's own authenticator does, reading the file at each connect", async () => {
    const account = createAccount();
    const write = async () => {
      const user = createUser();
      const jwt = await encodeUser("svc", user, account);
      const creds = fmtCreds(jwt, user);
      writeFileSync(join(dir, "svc.creds"), creds);
      return { jwt, user, creds };
    };
    const first = await write();
    const ours = authenticatorOf({ credsFile: join(dir, "svc.creds") });
    const nonce = "a-nonce-from-the-server";
    // Ed25519 is deterministic: the same key signs the same nonce the same way.
    expect(ours(nonce)).toEqual(credsAuthenticator(first.creds)(nonce));
    expect(ours(nonce)).toMatchObject({ jwt: first.jwt, nkey: first.user.getPublicKey() });
    expect(ours(undefined)).toMatchObject({ jwt: first.jwt, sig: "" });
    // A rotated file applies at the next (re)connect.
    const rotated = await write();
    expect(ours(nonce)).toEqual(credsAuthenticator(rotated.creds)(nonce));
  });

  it("answer it with an nkey seed file exactly as nats.js does", () => {
    const user = createUser();
    writeFileSync(join(dir, "svc.nk"), `${new TextDecoder().decode(user.getSeed())}\n`);
    const ours = authenticatorOf({ nkeySeedFile: join(dir, "svc.nk") });
    expect(ours("nonce")).toEqual(nkeyAuthenticator(user.getSeed())("nonce"));
    expect(ours("nonce")).toMatchObject({ nkey: user.getPublicKey() });
  });

  it("refuse a .creds file without both of its blocks, saying so and showing none of it", async () => {
    const user = createUser();
    const jwt = await encodeUser("svc", user, createAccount());
    const text = new TextDecoder().decode(fmtCreds(jwt, user));
    expect(parseCreds(text)).toEqual({ jwt, seed: new TextDecoder().decode(user.getSeed()) });
    const jwtOnly = text.slice(0, text.indexOf("NKEY"));
    expect(() => parseCreds(jwtOnly)).toThrow("unable to parse the NATS credentials file");
    expect(() => parseCreds("")).toThrow("unable to parse the NATS credentials file");
    writeFileSync(join(dir, "broken.creds"), jwtOnly);
    const refused = thrownBy(() => authenticatorOf({ credsFile: join(dir, "broken.creds") })("n"));
    expect((refused as Error).message).toBe("unable to parse the NATS credentials file");
    // So the process exits with status 78 instead of reconnecting for ever.
    expect(isNatsAuthError(refused)).toBe(true);
  });

  it("refuse a broken nkey seed without showing it", () => {
    const seed = new TextDecoder().decode(createUser().getSeed());
    const broken = `${seed.slice(0, -4)}AAAA`;
    writeFileSync(join(dir, "broken.nk"), broken);
    const refused = thrownBy(() => authenticatorOf({ nkeySeedFile: join(dir, "broken.nk") })("n"));
    expect((refused as Error).message).toBe("the NATS nkey seed is not a valid seed");
    expect(String((refused as Error).stack)).not.toContain(broken);
    expect(isNatsAuthError(refused)).toBe(true);
  });
});

describe("coalescing writes", () => {
  it("changes nothing and says so when the connection is not shaped like nats.js's", () => {
    const flushPending = () => undefined;
    // A connection whose protocol handler lacks what coalescing patches (nats.js renamed it, say).
    const foreign = Object.assign({} as NatsConnection, {
      protocol: { flushPending, close: async () => undefined },
    });
    expect(coalesceWrites(foreign)).toBe(false);
    expect(foreign.protocol.flushPending).toBe(flushPending);
    expect(coalesceWrites({} as NatsConnection)).toBe(false);
  });
});
