import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * A CA of its own made with openssl (tests, and `make dev SECURE=1`) in `dir` (`ca.pem`, `ca.key`), and for each of `leaves` a certificate
 * `<name>.pem` with its key `<name>.key` signed by it: a server's (`subjectAltName=DNS:…`) or a client's
 * (`extendedKeyUsage=clientAuth`). Valid two days.
 */
export function makeTestCa(
  dir: string,
  leaves: ReadonlyArray<readonly [name: string, commonName: string, extension: string]>,
): void {
  const ssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "ignore" });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
  ssl("req", "-x509", ...ec, "-days", "2", "-subj", "/CN=svc test CA", "-keyout", "ca.key", "-out", "ca.pem");
  for (const [name, cn, ext] of leaves) {
    ssl("req", ...ec, "-subj", `/CN=${cn}`, "-keyout", `${name}.key`, "-out", `${name}.csr`);
    writeFileSync(join(dir, `${name}.ext`), `${ext}\n`);
    ssl(
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-days",
      "2",
      "-extfile",
      `${name}.ext`,
      "-out",
      `${name}.pem`,
    );
  }
}

/** The server name the certificates of `makeMutualTls` are for. */
export const TEST_SERVER_NAME = "nats.test";

/**
 * A test CA in `dir` with a server certificate for TEST_SERVER_NAME and two client certificates,
 * `client` (the services) and `plugin` (the plugin processes); returns the nats-server `tls` block that
 * requires a client certificate from that CA.
 */
export function makeMutualTls(dir: string): string {
  makeTestCa(dir, [
    ["server", TEST_SERVER_NAME, `subjectAltName=DNS:${TEST_SERVER_NAME}`],
    ["client", "svc-service", "extendedKeyUsage=clientAuth"],
    ["plugin", "svc-plugins", "extendedKeyUsage=clientAuth"],
  ]);
  return [
    "tls {",
    `  cert_file: "${join(dir, "server.pem")}"`,
    `  key_file: "${join(dir, "server.key")}"`,
    `  ca_file: "${join(dir, "ca.pem")}"`,
    "  verify: true",
    "}",
    "",
  ].join("\n");
}
