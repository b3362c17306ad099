/**
 * NATS credentials for plugins. A plugin process never gets the registry's
 * connection or credentials. With decentralized auth (NATS_PLUGIN_SIGNING_KEY_FILE and
 * NATS_PLUGIN_ACCOUNT) the registry mints a user per plugin, signed by an account signing key, allowed
 * exactly that plugin's subjects (`pluginPermissions`: its route subject, its inbox, the events it
 * declares) and expiring: for each activation (renewed before it expires) and, on an operator's request,
 * for an external backend. With static auth (NATS_PLUGIN_NKEY_SEED_FILE) every plugin process is the one
 * plugins user of `make nats-auth`. With neither, plugin processes connect with no credentials.
 */
import { readFileSync } from "node:fs";

import { encodeUser, fmtCreds } from "@nats-io/jwt";
import { nativeCreateUser, nativeFromSeed, type NatsAuth } from "@svc/bus";
import { pluginInboxPrefix, pluginPermissions, SHARED_PLUGIN_INBOX, userPermissions } from "@svc/runtime";

import type { PluginRegistryConfig } from "../settings.js";
import { type PoolNatsAuth, type WorkerNatsAuth, workerTls } from "./worker-host.js";

/** A minted NATS user: its `.creds` (the JWT and the user's seed), its public key and when it expires. */
export interface MintedCredential {
  readonly creds: string;
  readonly publicKey: string;
  /** Unix milliseconds. */
  readonly expiresAt: number;
  /** The user JWT alone. */
  readonly jwt: string;
  /** The user's private key as PKCS #8 PEM (a plugin process signs the server's nonce with it). */
  readonly privateKeyPem: string;
}

/** An nkey as a plugin process signs with it: its public key and its private key as PKCS #8 PEM. */
function keyOf(seed: string): NonNullable<WorkerNatsAuth["key"]> {
  const key = nativeFromSeed(seed);
  try {
    return { publicKey: key.getPublicKey(), privateKeyPem: key.privateKeyPem() };
  } finally {
    key.clear();
  }
}

export class PluginCredentials {
  private readonly tls: WorkerNatsAuth["tls"] | undefined;

  constructor(
    private readonly config: Pick<
      PluginRegistryConfig,
      | "subjectPrefix"
      | "natsPluginSigningKeyFile"
      | "natsPluginAccount"
      | "natsPluginNkeySeedFile"
      | "natsPluginCredentialTtlSeconds"
      | "natsPluginTlsCertFile"
      | "natsPluginTlsKeyFile"
    >,
    serviceAuth: NatsAuth,
  ) {
    this.tls = workerTls(serviceAuth, {
      certFile: config.natsPluginTlsCertFile,
      keyFile: config.natsPluginTlsKeyFile,
    });
  }

  /** Whether the registry mints users (decentralized auth). */
  get minting(): boolean {
    return this.config.natsPluginSigningKeyFile !== null && this.config.natsPluginAccount !== null;
  }

  /** How the plugin processes' pool authenticates. */
  pool(): PoolNatsAuth {
    if (this.minting) return { kind: "per-plugin" };
    const seedFile = this.config.natsPluginNkeySeedFile;
    if (seedFile !== null) {
      return {
        kind: "shared",
        auth: { key: keyOf(readFileSync(seedFile, "utf8").trim()), ...(this.tls ? { tls: this.tls } : {}) },
        inboxPrefix: SHARED_PLUGIN_INBOX,
      };
    }
    return { kind: "none", ...(this.tls ? { tls: this.tls } : {}) };
  }

  /**
   * A user for one plugin, allowed only its own subjects and the events it declares, expiring after
   * `ttlSeconds` (the activation lifetime by default). The signing key is read at each call, so a rotated
   * key file applies to the next one.
   */
  async mint(
    pluginId: string,
    events: readonly string[],
    ttlSeconds = this.config.natsPluginCredentialTtlSeconds,
    name = `plugin:${pluginId}`,
  ): Promise<MintedCredential> {
    const { natsPluginSigningKeyFile: keyFile, natsPluginAccount: account } = this.config;
    if (keyFile === null || account === null) {
      throw new Error(
        "minting plugin credentials needs NATS_PLUGIN_SIGNING_KEY_FILE and NATS_PLUGIN_ACCOUNT",
      );
    }
    // Node's Ed25519: the library's own takes some 24 ms per user (native-nkeys.ts in @svc/bus).
    const signer = nativeFromSeed(readFileSync(keyFile, "utf8").trim());
    const user = nativeCreateUser();
    const expiresAt = (Math.floor(Date.now() / 1_000) + ttlSeconds) * 1_000;
    const jwt = await encodeUser(
      name,
      user,
      signer,
      {
        issuer_account: account,
        ...userPermissions(pluginPermissions(pluginId, events, { prefix: this.config.subjectPrefix })),
      },
      { exp: expiresAt / 1_000 },
    );
    return {
      creds: new TextDecoder().decode(fmtCreds(jwt, user)),
      publicKey: user.getPublicKey(),
      expiresAt,
      jwt,
      privateKeyPem: user.privateKeyPem(),
    };
  }

  /** What a plugin process is sent at load with a minted user. */
  async forActivation(
    pluginId: string,
    events: readonly string[],
  ): Promise<{ auth: WorkerNatsAuth; inboxPrefix: string; expiresAt: number }> {
    const minted = await this.mint(pluginId, events);
    return {
      auth: {
        key: { publicKey: minted.publicKey, privateKeyPem: minted.privateKeyPem },
        jwt: minted.jwt,
        ...(this.tls ? { tls: this.tls } : {}),
      },
      inboxPrefix: pluginInboxPrefix(pluginId),
      expiresAt: minted.expiresAt,
    };
  }
}
