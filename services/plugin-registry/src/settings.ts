/** The plugin registry's settings: trusted signers, revocations, unsigned plugins, limits. */
import { createPublicKey, type KeyObject } from "node:crypto";
import { accessSync, constants } from "node:fs";

import { type ConfigOf, defineSettings, setting } from "@svc/config";
import { fingerprintOf } from "@svc/plugin-package";

export interface ConfiguredSigner {
  readonly publisherId: string;
  readonly displayName: string;
  readonly publicKey: KeyObject;
  readonly fingerprint: string;
}

const SIGNERS = "BackendHost:TrustedSigners";

export const pluginRegistrySettings = defineSettings({
  owner: "plugin-registry",
  top: {
    // How plugin processes authenticate to NATS: never with the registry's own
    // credentials. None of these: plugin processes connect with no credentials (an open server).
    natsPluginSigningKeyFile: setting.optionalString(
      "NATS_PLUGIN_SIGNING_KEY_FILE",
      "seed (`SA…`) of an account signing key: the registry mints a short-lived NATS user per plugin activation and for external backends, allowed only that plugin's subjects (decentralized auth; with NATS_PLUGIN_ACCOUNT)",
    ),
    natsPluginAccount: setting.optionalString(
      "NATS_PLUGIN_ACCOUNT",
      "public key (`A…`) of the account NATS_PLUGIN_SIGNING_KEY_FILE signs for (`account.pub` of `make nats-auth MODEL=decentralized`)",
    ),
    natsPluginNkeySeedFile: setting.optionalString(
      "NATS_PLUGIN_NKEY_SEED_FILE",
      "seed (`SU…`) of the one NATS user every plugin process shares (static auth: `plugins.nk` of `make nats-auth`)",
    ),
    natsPluginTlsCertFile: setting.optionalString(
      "NATS_PLUGIN_TLS_CERT_FILE",
      "client certificate (PEM) plugin processes present to a NATS server that verifies clients (never the registry's own)",
    ),
    natsPluginTlsKeyFile: setting.optionalString(
      "NATS_PLUGIN_TLS_KEY_FILE",
      "the plugin client certificate's private key (PEM)",
    ),
    natsPluginCredentialTtlSeconds: setting.int(
      "NATS_PLUGIN_CREDENTIAL_TTL_SECONDS",
      3_600,
      5,
      86_400,
      "lifetime of the NATS user minted for a plugin activation; renewed (without a gap) at two thirds of it",
    ),
  },
  backendHost: {
    trustedSigners: setting.custom({
      name: SIGNERS,
      doc: "signers whose plugin packages are trusted: `PublisherId`, `DisplayName`, `PublicKey` (PEM of a P-256 key, `\\n` for line breaks)",
      defaultText: "none",
      secret: false,
      display: "BackendHost__TrustedSigners__N__PublisherId`, `__DisplayName`, `__PublicKey",
      read: (r): readonly ConfiguredSigner[] =>
        r.objects(SIGNERS, ["PublisherId", "DisplayName", "PublicKey"]).flatMap((entry, index) => {
          const label = `BackendHost__TrustedSigners__${index}`;
          if (!entry.PublisherId || !entry.PublicKey) {
            r.problems.push(`${label}: PublisherId and PublicKey are required`);
            return [];
          }
          try {
            const publicKey = createPublicKey(entry.PublicKey);
            return [
              {
                publisherId: entry.PublisherId,
                displayName: entry.DisplayName ?? entry.PublisherId,
                publicKey,
                fingerprint: fingerprintOf(publicKey),
              },
            ];
          } catch (error) {
            r.problems.push(
              `${label}__PublicKey: expected the PEM of an EC P-256 public key (${(error as Error).message})`,
            );
            return [];
          }
        }),
    }),
    pluginAuditRetentionDays: setting.int(
      "BackendHost:PluginAuditRetentionDays",
      365,
      30,
      3_650,
      "days an entry of the plugins' audit (GET /api/plugins/audit: who installed, activated, granted what) is kept before it is deleted; swept at the registry's start and hourly, in batches",
    ),
    allowUnsignedPlugins: setting.bool(
      "BackendHost:AllowUnsignedPlugins",
      false,
      "install plugins that carry no signature (refused unless NODE_ENV=development)",
    ),
    revokedSignerFingerprints: setting.sha256List(
      "BackendHost:RevokedSignerFingerprints",
      "signer fingerprints (SHA-256 of the public key: 64 hex digits, either case, `:` allowed) whose packages are refused at install and at every load; a malformed entry stops the start",
    ),
    revokedContentHashes: setting.sha256List(
      "BackendHost:RevokedContentHashes",
      "file content hashes (SHA-256: 64 hex digits, either case, `:` allowed) whose packages, signed or not, are refused at install and at every load; a malformed entry stops the start",
    ),
    pluginLocalRoots: setting.list(
      "BackendHost:PluginLocalRoots",
      "directories under which `POST /api/plugins/install/local` may read packages (none: the route is refused)",
    ),
    pluginFeedUrl: setting.optionalString(
      "BackendHost:PluginFeedUrl",
      "package feed of `/install/nuget` and `/update/nuget`: serves `<feed>/<id>/-/<id>-<version>.tgz` (npm registry layout)",
    ),
    pluginMaxFiles: setting.int(
      "BackendHost:PluginMaxFiles",
      2_000,
      1,
      100_000,
      "most files one plugin package may hold",
    ),
    pluginMaxExpandedBytes: setting.int(
      "BackendHost:PluginMaxExpandedBytes",
      50 * 1024 * 1024,
      1024,
      1024 * 1024 * 1024,
      "most bytes one plugin package may expand to (archives are stopped at this size while inflating)",
    ),
    pluginCacheDir: setting.string(
      "BackendHost:PluginCacheDir",
      "",
      "local directory where activated plugins are unpacked, kept until uninstalled (re-verified before every load); empty: `<tmp>/svc-plugin-cache/<deployment>`, one per database and subject prefix",
    ),
    pluginMemoryLimitMb: setting.int(
      "BackendHost:PluginMemoryLimitMb",
      128,
      16,
      4_096,
      "heap limit of one plugin's worker; a plugin that exceeds it is stopped and marked failed",
    ),
    surfaceRenderTimeoutMs: setting.int(
      "BackendHost:SurfaceRenderTimeoutMs",
      1_000,
      50,
      30_000,
      "longest one server-side render of a surface may take; a template that runs longer is cut off and the shell is served",
    ),
    surfaceRenderWorkers: setting.int(
      "BackendHost:SurfaceRenderWorkers",
      2,
      1,
      32,
      "processes rendering surface templates in each plugin-registry replica",
    ),
    pluginSpareProcesses: setting.int(
      "BackendHost:PluginSpareProcesses",
      2,
      0,
      8,
      "plugin processes each replica keeps started in advance (about 50 MB each), so an activation need not wait for one to boot (about 70 ms); 0 saves the memory",
    ),
    pluginHangTimeoutMs: setting.int(
      "BackendHost:PluginHangTimeoutMs",
      2_000,
      200,
      60_000,
      "a plugin whose worker does not answer a heartbeat for this long (a busy loop) is pinged again and, silent a second later (time for a full heap to abort it, named as such), stopped and marked failed",
    ),
  },
  check(config, problems) {
    const c = config as {
      nodeEnv: string;
      backendHost: { allowUnsignedPlugins: boolean };
      natsPluginSigningKeyFile: string | null;
      natsPluginAccount: string | null;
      natsPluginNkeySeedFile: string | null;
      natsPluginTlsCertFile: string | null;
      natsPluginTlsKeyFile: string | null;
    };
    if (c.nodeEnv !== "development" && c.backendHost.allowUnsignedPlugins) {
      problems.push(
        `BackendHost__AllowUnsignedPlugins: must be false when NODE_ENV is ${c.nodeEnv} (unsigned plugins only with NODE_ENV=development set explicitly)`,
      );
    }
    if ((c.natsPluginSigningKeyFile === null) !== (c.natsPluginAccount === null)) {
      problems.push(
        "NATS_PLUGIN_SIGNING_KEY_FILE, NATS_PLUGIN_ACCOUNT: a signing key needs the account it signs for, and the account its signing key",
      );
    }
    if (c.natsPluginAccount !== null && !/^A[A-Z2-7]{55}$/.test(c.natsPluginAccount)) {
      problems.push(
        "NATS_PLUGIN_ACCOUNT: expected an account public key (`A` and 55 more letters and digits)",
      );
    }
    if (c.natsPluginSigningKeyFile !== null && c.natsPluginNkeySeedFile !== null) {
      problems.push(
        "NATS_PLUGIN_SIGNING_KEY_FILE, NATS_PLUGIN_NKEY_SEED_FILE: set one way for plugin processes to authenticate",
      );
    }
    if ((c.natsPluginTlsCertFile === null) !== (c.natsPluginTlsKeyFile === null)) {
      problems.push(
        "NATS_PLUGIN_TLS_CERT_FILE, NATS_PLUGIN_TLS_KEY_FILE: a client certificate needs its key, and the key its certificate",
      );
    }
    for (const [name, path] of [
      ["NATS_PLUGIN_SIGNING_KEY_FILE", c.natsPluginSigningKeyFile],
      ["NATS_PLUGIN_NKEY_SEED_FILE", c.natsPluginNkeySeedFile],
      ["NATS_PLUGIN_TLS_CERT_FILE", c.natsPluginTlsCertFile],
      ["NATS_PLUGIN_TLS_KEY_FILE", c.natsPluginTlsKeyFile],
    ] as const) {
      if (path === null) continue;
      try {
        accessSync(path, constants.R_OK);
      } catch {
        problems.push(`${name}: cannot read the file '${path}'`);
      }
    }
  },
});

/** The configuration this service reads: the platform's settings and its own. */
export type PluginRegistryConfig = ConfigOf<typeof pluginRegistrySettings>;
