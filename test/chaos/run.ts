/**
 * What a chaos run owns and how it speaks: its stamp, its own database on the server of DATABASE_URL
 * (`<prefix><stamp>`), its work directory with a logs folder, and its progress lines.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export function chaosRun(label: string, databasePrefix: string) {
  const t0 = Date.now();
  const say = (message: string) =>
    process.stdout.write(`[${label} +${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s] ${message}\n`);
  const stamp = `${new Date().toISOString().replace(/\D/g, "").slice(0, 14)}_${randomBytes(2).toString("hex")}`;
  const dbName = `${databasePrefix}${stamp}`;
  const serverUrl = new URL(process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
  serverUrl.pathname = "/postgres";
  const dbUrl = new URL(serverUrl);
  dbUrl.pathname = `/${dbName}`;
  const workDir = mkdtempSync(join(tmpdir(), `svc-${label}-`));
  const logDir = join(workDir, "logs");
  mkdirSync(logDir);
  return { t0, say, stamp, dbName, serverUrl, dbUrl, workDir, logDir };
}
