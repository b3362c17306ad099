/**
 * Plugin package signing exactly as the spec defines it, checked against the `openssl`
 * binary both ways (our CLI signs, openssl verifies; openssl signs, our verifier accepts), both signature
 * encodings (DER and IEEE P1363), and the verifier's refusals on a package directory.
 */
import { execFileSync } from "node:child_process";
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";

import { ConfigError, configOf, parseConfig } from "@svc/config";
import {
  canonicalBytes,
  type SignatureManifest,
  type TrustedSigner,
  verifyPackage,
} from "@svc/plugin-package";
import { pluginRegistrySettings } from "@svc/service-plugin-registry";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { main } from "../shared/plugin-package/src/cli.js";

const work = mkdtempSync(join(tmpdir(), "svc-plugin-signing-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const openssl = (...args: string[]) => execFileSync("openssl", args, { encoding: "utf8" });
const at = (...parts: string[]) => join(work, ...parts);
let counter = 0;

/** A fresh package directory with a registry.json, an entry module, a template with non-ASCII text. */
/** A registry.json that keeps every rule `sign` checks. */
const REGISTRY = {
  contractVersion: "1.0",
  schemaVersion: "1.0",
  name: "Hello",
  pluginId: "hello",
  version: "1.2.3",
  assemblyFileName: "index.mjs",
  entryTypeName: "Hello",
};

function makePackage(): string {
  const dir = at(`pkg-${++counter}`);
  mkdirSync(join(dir, "views", "surface"), { recursive: true });
  writeFileSync(join(dir, "registry.json"), JSON.stringify(REGISTRY));
  writeFileSync(join(dir, "index.mjs"), "export class Hello {}\n");
  writeFileSync(join(dir, "views", "surface", "index.njk"), "<h1>Grüße, {{ name }}</h1>\n");
  writeFileSync(join(dir, "Zebra.txt"), "sorted before lower case\n");
  return dir;
}

async function cli(...args: string[]): Promise<number> {
  return main(args);
}

beforeAll(() => {
  // A P-256 key made by openssl, as an author would (PKCS#8 PEM), and its public half.
  openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", at("sec1.pem"));
  openssl("pkcs8", "-topk8", "-nocrypt", "-in", at("sec1.pem"), "-out", at("key.pem"));
  openssl("pkey", "-in", at("key.pem"), "-pubout", "-out", at("pub.pem"));
  openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", at("other.pem"));
  openssl("pkey", "-in", at("other.pem"), "-pubout", "-out", at("other-pub.pem"));
});

const trusted = (): TrustedSigner[] => [
  {
    publisherId: "acme",
    displayName: "Acme",
    publicKey: createPublicKey(readFileSync(at("pub.pem"))),
  },
];

/** The canonical bytes written by hand from openssl's own hashes, independent of our library. */
function canonicalByHand(dir: string, paths: string[], fingerprint: string): string {
  const files = [...paths]
    .sort()
    .map((p) => `{"path":"${p}","sha256":"${openssl("dgst", "-sha256", "-r", join(dir, p)).split(" ")[0]}"}`);
  return (
    `{"schemaVersion":"1.0","pluginId":"hello","version":"1.2.3","algorithm":"ECDSA-P256-SHA256",` +
    `"signerFingerprint":"${fingerprint}","files":[${files.join(",")}]}`
  );
}

const PATHS = ["Zebra.txt", "index.mjs", "registry.json", "views/surface/index.njk"];

describe("signing as the spec defines it, against openssl", () => {
  it("signs with the CLI; openssl verifies the signature over the canonical bytes", async () => {
    const dir = makePackage();
    expect(await cli("sign", "--plugin", dir, "--key", at("key.pem"))).toBe(0);
    const manifest = JSON.parse(
      readFileSync(join(dir, "plugin.signature.json"), "utf8"),
    ) as SignatureManifest;
    // The fingerprint is the SHA-256 of the public key's SubjectPublicKeyInfo DER, as openssl computes it.
    const der = execFileSync("openssl", ["pkey", "-pubin", "-in", at("pub.pem"), "-outform", "DER"]);
    writeFileSync(at("pub.der"), der);
    const fingerprint = openssl("dgst", "-sha256", "-r", at("pub.der")).split(" ")[0];
    expect(manifest.signerFingerprint).toBe(fingerprint);
    expect(manifest.algorithm).toBe("ECDSA-P256-SHA256");
    expect(manifest.files.map((f) => f.path)).toEqual(PATHS);
    const canonical = canonicalByHand(dir, PATHS, fingerprint as string);
    expect(canonicalBytes(manifest).toString("utf8")).toBe(canonical);
    writeFileSync(at("canonical.json"), canonical);
    writeFileSync(at("cli.sig"), Buffer.from(manifest.signature as string, "base64"));
    expect(
      openssl("dgst", "-sha256", "-verify", at("pub.pem"), "-signature", at("cli.sig"), at("canonical.json")),
    ).toContain("Verified OK");
  });

  it("accepts a manifest signed by plain openssl dgst -sign (DER), and the same signature as P1363", async () => {
    const dir = makePackage();
    // Hash and list the files with our CLI's signing, then replace the signature with openssl's own.
    expect(await cli("sign", "--plugin", dir, "--key", at("key.pem"))).toBe(0);
    const manifest = JSON.parse(
      readFileSync(join(dir, "plugin.signature.json"), "utf8"),
    ) as SignatureManifest;
    writeFileSync(at("to-sign.json"), canonicalBytes(manifest));
    openssl("dgst", "-sha256", "-sign", at("key.pem"), "-out", at("openssl.sig"), at("to-sign.json"));
    const byOpenssl = { ...manifest, signature: readFileSync(at("openssl.sig")).toString("base64") };
    writeFileSync(join(dir, "plugin.signature.json"), JSON.stringify(byOpenssl));
    expect(await verifyPackage(dir, { trusted: trusted() })).toMatchObject({ ok: true, signed: true });

    // What .NET's ECDsa.SignData writes: r||s, 64 bytes.
    const p1363 = sign("sha256", canonicalBytes(manifest), {
      key: createPrivateKey(readFileSync(at("key.pem"))),
      dsaEncoding: "ieee-p1363",
    });
    expect(p1363).toHaveLength(64);
    writeFileSync(
      join(dir, "plugin.signature.json"),
      JSON.stringify({ ...manifest, signature: p1363.toString("base64") }),
    );
    expect(await verifyPackage(dir, { trusted: trusted() })).toMatchObject({ ok: true, signed: true });
  });
});

describe("the verifier refuses, naming why", () => {
  async function signed(): Promise<string> {
    const dir = makePackage();
    expect(await cli("sign", "--plugin", dir, "--key", at("key.pem"))).toBe(0);
    return dir;
  }

  it("a tampered, an injected and a missing file", async () => {
    const tampered = await signed();
    writeFileSync(join(tampered, "index.mjs"), "export class Evil {}\n");
    expect(await verifyPackage(tampered, { trusted: trusted() })).toMatchObject({
      ok: false,
      code: "hash-mismatch",
      path: "index.mjs",
    });
    const injected = await signed();
    writeFileSync(join(injected, "extra.mjs"), "1");
    expect(await verifyPackage(injected, { trusted: trusted() })).toMatchObject({
      code: "file-not-in-manifest",
      path: "extra.mjs",
    });
    const missing = await signed();
    rmSync(join(missing, "Zebra.txt"));
    expect(await verifyPackage(missing, { trusted: trusted() })).toMatchObject({
      code: "file-missing",
      path: "Zebra.txt",
    });
  });

  it("an untrusted, a revoked signer and revoked content; a manifest with a bad signature", async () => {
    const dir = await signed();
    const other = generateKeyPairSync("ec", { namedCurve: "prime256v1" }).publicKey;
    expect(
      await verifyPackage(dir, { trusted: [{ publisherId: "x", displayName: "X", publicKey: other }] }),
    ).toMatchObject({ code: "untrusted-signer" });
    const manifest = JSON.parse(
      readFileSync(join(dir, "plugin.signature.json"), "utf8"),
    ) as SignatureManifest;
    expect(
      await verifyPackage(dir, {
        trusted: trusted(),
        revokedSignerFingerprints: [manifest.signerFingerprint],
      }),
    ).toMatchObject({ code: "revoked-signer" });
    const entry = manifest.files.find((f) => f.path === "index.mjs");
    expect(
      await verifyPackage(dir, { trusted: trusted(), revokedContentHashes: [entry?.sha256 as string] }),
    ).toMatchObject({ code: "revoked-content", path: "index.mjs" });
    // A signature over other bytes: a manifest whose version was edited after signing.
    writeFileSync(join(dir, "plugin.signature.json"), JSON.stringify({ ...manifest, version: "9.9.9" }));
    writeFileSync(join(dir, "registry.json"), JSON.stringify({ pluginId: "hello", version: "9.9.9" }));
    const resigned = JSON.parse(
      readFileSync(join(dir, "plugin.signature.json"), "utf8"),
    ) as SignatureManifest;
    const hash = execFileSync("openssl", ["dgst", "-sha256", "-r", join(dir, "registry.json")], {
      encoding: "utf8",
    }).split(" ")[0] as string;
    writeFileSync(
      join(dir, "plugin.signature.json"),
      JSON.stringify({
        ...resigned,
        files: resigned.files.map((f) => (f.path === "registry.json" ? { ...f, sha256: hash } : f)),
      }),
    );
    const edited = await verifyPackage(dir, { trusted: trusted() });
    expect(edited).toMatchObject({ code: "bad-signature" });
    // Changed content is no canonical-form mistake: no hint.
    expect((edited as { reason: string }).reason).toBe(
      "The signature does not verify with the signer's public key.",
    );
  });

  it("a signature made over a hand-written canonical form with the usual mistakes says which (Python's json.dumps, openssl)", async () => {
    const dir = await signed();
    const manifest = JSON.parse(
      readFileSync(join(dir, "plugin.signature.json"), "utf8"),
    ) as SignatureManifest;
    // The files as listed, not sorted, and json.dumps's default ", " and ": ": what a first signer in
    // Python writes.
    const listed = { ...manifest, files: [...manifest.files].reverse() };
    delete (listed as { signature?: string }).signature;
    writeFileSync(at("listed.json"), JSON.stringify(listed));
    const python = [
      "import json, sys",
      "m = json.load(open(sys.argv[1]))",
      "keys = ['schemaVersion', 'pluginId', 'version', 'algorithm', 'signerFingerprint', 'files']",
      "out = {k: m[k] for k in keys}",
      "out['files'] = [{'path': f['path'], 'sha256': f['sha256']} for f in m['files']]",
      "open(sys.argv[2], 'w').write(json.dumps(out))",
    ].join("\n");
    execFileSync("python3", ["-c", python, at("listed.json"), at("by-python.json")]);
    expect(readFileSync(at("by-python.json"), "utf8")).toContain('"files": [{"path": ');
    openssl("dgst", "-sha256", "-sign", at("key.pem"), "-out", at("python.sig"), at("by-python.json"));
    writeFileSync(
      join(dir, "plugin.signature.json"),
      JSON.stringify({ ...listed, signature: readFileSync(at("python.sig")).toString("base64") }),
    );
    const result = await verifyPackage(dir, { trusted: trusted() });
    expect(result).toMatchObject({ ok: false, code: "bad-signature" });
    const reason = (result as { reason: string }).reason;
    expect(reason).toContain("the files in the order the manifest lists them (sort them by path)");
    expect(reason).toContain("spaces after ',' and ':' (write compact JSON)");
    expect(reason).not.toContain("alphabetical");
  });

  it("an unsigned package unless allowed, a symlink, a duplicate path, a registry.json that disagrees", async () => {
    const unsigned = makePackage();
    expect(await verifyPackage(unsigned, { trusted: trusted() })).toMatchObject({ code: "unsigned" });
    expect(await verifyPackage(unsigned, { trusted: trusted(), allowUnsigned: true })).toMatchObject({
      ok: true,
      signed: false,
    });
    // Allowed unsigned packages are still checked against revoked content.
    const hash = openssl("dgst", "-sha256", "-r", join(unsigned, "index.mjs")).split(" ")[0] as string;
    expect(
      await verifyPackage(unsigned, {
        trusted: trusted(),
        allowUnsigned: true,
        revokedContentHashes: [hash],
      }),
    ).toMatchObject({ ok: false, code: "revoked-content", path: "index.mjs" });
    const linked = await signed();
    symlinkSync("/etc/passwd", join(linked, "passwd"));
    expect(await verifyPackage(linked, { trusted: trusted() })).toMatchObject({
      code: "unreadable",
      path: "passwd",
    });
    const duplicate = await signed();
    const manifest = JSON.parse(
      readFileSync(join(duplicate, "plugin.signature.json"), "utf8"),
    ) as SignatureManifest;
    writeFileSync(
      join(duplicate, "plugin.signature.json"),
      JSON.stringify({ ...manifest, files: [...manifest.files, manifest.files[0]] }),
    );
    expect(await verifyPackage(duplicate, { trusted: trusted() })).toMatchObject({ code: "duplicate-path" });
    const renamed = await signed();
    writeFileSync(join(renamed, "plugin.signature.json"), JSON.stringify({ ...manifest, pluginId: "other" }));
    expect(await verifyPackage(renamed, { trusted: trusted() })).toMatchObject({
      code: expect.stringMatching(/hash-mismatch|registry-mismatch/),
    });
  });
});

describe("revocation settings", () => {
  it("reads revocation lists as SHA-256 digests in either case and with ':' separators, and names a bad entry", () => {
    const digest = "ab".repeat(32);
    const printed = digest.toUpperCase().match(/../g)?.join(":") as string;
    const config = configOf(
      parseConfig(
        {
          NODE_ENV: "development",
          BackendHost__RevokedSignerFingerprints__0: printed,
          BackendHost__RevokedContentHashes__0: ` ${digest.toUpperCase()} `,
        },
        { settings: [pluginRegistrySettings] },
      ),
      pluginRegistrySettings,
    );
    expect(config.backendHost.revokedSignerFingerprints).toEqual([digest]);
    expect(config.backendHost.revokedContentHashes).toEqual([digest]);
    let error: unknown;
    try {
      parseConfig(
        {
          NODE_ENV: "development",
          BackendHost__RevokedSignerFingerprints__0: digest,
          BackendHost__RevokedSignerFingerprints__1: "SHA256:not-a-digest",
          BackendHost__RevokedContentHashes__0: digest.slice(2),
        },
        { settings: [pluginRegistrySettings] },
      );
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join("\n");
    expect(problems).toContain("BackendHost__RevokedSignerFingerprints__1");
    expect(problems).toContain("BackendHost__RevokedContentHashes__0");
    expect((error as ConfigError).problems).toHaveLength(2);
  });
});

/** Runs the CLI, answering its exit status and what it wrote. */
async function cliOutput(...args: string[]): Promise<{ status: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const write = {
    out: process.stdout.write.bind(process.stdout),
    err: process.stderr.write.bind(process.stderr),
  };
  process.stdout.write = (chunk: string) => ((out += chunk), true);
  process.stderr.write = (chunk: string) => ((err += chunk), true);
  try {
    return { status: await main(args), out, err };
  } finally {
    process.stdout.write = write.out;
    process.stderr.write = write.err;
  }
}

describe("the CLI checks registry.json as an install does", () => {
  it("validate lists every rule broken at once, and sign refuses such a package", async () => {
    const dir = makePackage();
    writeFileSync(
      join(dir, "registry.json"),
      JSON.stringify({ ...REGISTRY, version: "1.0", permissions: ["Hello.Greeting", "other.greeting.read"] }),
    );
    const checked = await cliOutput("validate", "--plugin", dir);
    expect(checked.status).toBe(1);
    expect(checked.err).toContain("registry.json breaks");
    expect(checked.err).toContain("version: '1.0' is not a semantic version");
    expect(checked.err).toContain("permissions/0: 'Hello.Greeting' is not lower case");
    expect(checked.err).toContain("permissions/1: 'other.greeting.read' is outside the plugin's namespace");
    const signing = await cliOutput("sign", "--plugin", dir, "--key", at("key.pem"));
    expect(signing.status).toBe(1);
    expect(signing.err).toContain("version: '1.0' is not a semantic version");
    expect(existsSync(join(dir, "plugin.signature.json"))).toBe(false);
    // The same package, mended: valid, and signed.
    writeFileSync(join(dir, "registry.json"), JSON.stringify(REGISTRY));
    expect((await cliOutput("validate", "--plugin", dir)).out).toContain("valid: hello 1.2.3");
    expect((await cliOutput("sign", "--plugin", dir, "--key", at("key.pem"))).status).toBe(0);
  });

  it("answers --help for itself and each command", async () => {
    for (const args of [["--help"], ["help"], ["help", "sign"], ["sign", "--help"], ["validate", "-h"]]) {
      const shown = await cliOutput(...args);
      expect(shown.status, args.join(" ")).toBe(0);
      expect(shown.out, args.join(" ")).toMatch(/^usage:/);
    }
    expect((await cliOutput("--help")).out).toContain("svc-plugin validate --plugin <dir>");
    expect((await cliOutput("sign", "--help")).out).toContain("svc-plugin sign --plugin <dir> --key");
    const none = await cliOutput();
    expect(none.status).toBe(2);
  });
});

describe("the CLI's errors", () => {
  it("exits 1 for a missing key or a key on the wrong curve, 2 for bad usage", async () => {
    const dir = makePackage();
    expect(await cli("sign", "--plugin", dir, "--key", at("nope.pem"))).toBe(1);
    openssl("ecparam", "-name", "secp384r1", "-genkey", "-noout", "-out", at("p384.pem"));
    expect(await cli("sign", "--plugin", dir, "--key", at("p384.pem"))).toBe(1);
    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", at("rsa.pem"));
    expect(await cli("sign", "--plugin", dir, "--key", at("rsa.pem"))).toBe(1);
    expect(await cli("sign", "--plugin", at("no-such-dir"), "--key", at("key.pem"))).toBe(1);
    expect(await cli("sign", "--plugin", dir)).toBe(2);
    expect(await cli("launch")).toBe(2);
    expect(await cli("verify", "--plugin", dir, "--trusted", at("pub.pem"))).toBe(1);
    expect(await cli("verify", "--plugin", dir, "--allow-unsigned")).toBe(0);
  });

  it("packs a signed package into a .tgz that lists every file and the manifest", async () => {
    const dir = makePackage();
    expect(await cli("sign", "--plugin", dir, "--key", at("key.pem"))).toBe(0);
    const out = at("hello.tgz");
    expect(await cli("pack", "--plugin", dir, "--out", out)).toBe(0);
    const listed = execFileSync("tar", ["-tzf", out], { encoding: "utf8" }).trim().split("\n").sort();
    expect(listed).toEqual([...PATHS, "plugin.signature.json"].sort());
    // The archive verifies as the directory did.
    expect(await cli("verify", "--plugin", out, "--trusted", at("pub.pem"))).toBe(0);
    expect(await cli("verify", "--plugin", out, "--trusted", at("other-pub.pem"))).toBe(1);
    // So does an archive of the folder itself, as GNU tar makes it: one top-level folder.
    const folder = at("top-folder.tgz");
    execFileSync("tar", ["czf", folder, "-C", dirname(dir), basename(dir)]);
    expect(await cli("verify", "--plugin", folder, "--trusted", at("pub.pem"))).toBe(0);
  });
});
