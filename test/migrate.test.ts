/** Numbered per-service migrations, applied once, in order, under a lock; edits are refused. */
import { createHash } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { migrate } from "@svc/db";
import { afterAll, describe, expect, it } from "vitest";

import { migrationSources } from "../scripts/lib/stack.js";
// The migrator's internals, reached by path: the files as it reads them and the pre-mending checksums.
import { COMMENTS_EDITED } from "../shared/db/src/legacy-checksums.js";
import { listMigrations } from "../shared/db/src/migrate.js";
import { createHarness } from "./support/harness.js";

const h = await createHarness({ seed: false });
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

describe("migrations", () => {
  it("gave every service its own schema in the template", async () => {
    const rows = await h.sql<{ schema_name: string }>(
      "SELECT schema_name FROM information_schema.schemata WHERE schema_name = ANY($1) ORDER BY 1",
      [["resolver", "rbac", "plugin_registry", "webhook_dispatcher", "job_reaper"]],
    );
    expect(rows.map((r) => r.schema_name)).toEqual([
      "job_reaper",
      "plugin_registry",
      "rbac",
      "resolver",
      "webhook_dispatcher",
    ]);
  });

  it("applies nothing when the database is up to date", async () => {
    expect(await migrate(h.db.url, migrationSources())).toEqual([]);
  });

  it("applies new files in order, once, even when two migrators race", async () => {
    const dir = await mkdtemp(join(tmpdir(), "svc-mig-"));
    dirs.push(dir);
    await writeFile(join(dir, "0001_create.sql"), "CREATE SCHEMA demo_mig; CREATE TABLE demo_mig.t (n int);");
    await writeFile(join(dir, "0002_fill.sql"), "INSERT INTO demo_mig.t VALUES (1), (2);");
    const source = [{ service: "demo-mig", directory: dir }];
    const [a, b] = await Promise.all([migrate(h.db.url, source), migrate(h.db.url, source)]);
    expect([...(a ?? []), ...(b ?? [])].map((m) => m.version)).toEqual([1, 2]);
    expect(await h.sql("SELECT count(*)::int AS n FROM demo_mig.t")).toEqual([{ n: 2 }]);
  });

  it("joins a library's directory to a service's sequence, and refuses a version claimed twice", async () => {
    const own = await mkdtemp(join(tmpdir(), "svc-mig-"));
    const library = await mkdtemp(join(tmpdir(), "svc-mig-"));
    dirs.push(own, library);
    await writeFile(join(own, "0001_schema.sql"), "CREATE SCHEMA joined_mig;");
    await writeFile(join(library, "0002_table.sql"), "CREATE TABLE joined_mig.t (n int);");
    await writeFile(join(own, "0003_fill.sql"), "INSERT INTO joined_mig.t VALUES (3);");
    const source = [{ service: "joined-mig", directory: own, alsoFrom: [library] }];
    expect((await migrate(h.db.url, source)).map((m) => m.version)).toEqual([1, 2, 3]);
    await writeFile(join(library, "0003_other.sql"), "SELECT 1;");
    await expect(migrate(h.db.url, source)).rejects.toThrow(/0003_fill\.sql and .*0003_other\.sql claim it/);
  });

  it("refuses to run when an applied migration was edited", async () => {
    const dir = await mkdtemp(join(tmpdir(), "svc-mig-"));
    dirs.push(dir);
    await writeFile(join(dir, "0001_create.sql"), "CREATE TABLE public.edited_mig (n int);");
    const source = [{ service: "edited-mig", directory: dir }];
    await migrate(h.db.url, source);
    await writeFile(join(dir, "0001_create.sql"), "CREATE TABLE public.edited_mig (n bigint);");
    await expect(migrate(h.db.url, source)).rejects.toThrow(/changed after it was applied/);
  });

  it("lets a comment be mended in an applied migration, and still refuses a changed statement", async () => {
    const dir = await mkdtemp(join(tmpdir(), "svc-mig-"));
    dirs.push(dir);
    const file = join(dir, "0001_create.sql");
    await writeFile(file, "-- A table (first draft).\nCREATE TABLE public.mended_mig (n int); -- why\n");
    const source = [{ service: "mended-mig", directory: dir }];
    await migrate(h.db.url, source);
    await writeFile(
      file,
      "-- A table, said better.\n/* and a block */\nCREATE TABLE   public.mended_mig (n int);\n",
    );
    expect(await migrate(h.db.url, source)).toEqual([]);
    await writeFile(file, "-- A table, said better.\nCREATE TABLE public.mended_mig (n int, m int);\n");
    await expect(migrate(h.db.url, source)).rejects.toThrow(/changed after it was applied/);
  });

  it("takes a database whose migrations were recorded with whole-file checksums, and records the statements' from then on", async () => {
    const sources = migrationSources();
    // As an earlier migrator left it: each row the checksum of the whole file, as the file was then (for
    // the migrations whose comments were mended since, the file before the mending).
    for (const source of sources) {
      for (const m of await listMigrations(source)) {
        const old =
          COMMENTS_EDITED[`${source.service}/${m.version}`]?.[0] ??
          createHash("sha256").update(m.text).digest("hex");
        await h.sql(
          "UPDATE public.svc_schema_migrations SET checksum = $3 WHERE service = $1 AND version = $2",
          [source.service, m.version, old],
        );
      }
    }
    expect(await migrate(h.db.url, sources)).toEqual([]);
    const rows = await h.sql<{ checksum: string }>(
      "SELECT checksum FROM public.svc_schema_migrations WHERE service = ANY($1)",
      [sources.map((s) => s.service)],
    );
    expect(rows.length).toBeGreaterThan(40);
    expect(rows.every((r) => r.checksum.startsWith("v2:"))).toBe(true);
    // A whole-file checksum of anything else is still an edit.
    await h.sql(
      "UPDATE public.svc_schema_migrations SET checksum = $1 WHERE service = 'rbac' AND version = 1",
      [createHash("sha256").update("something else").digest("hex")],
    );
    await expect(migrate(h.db.url, sources)).rejects.toThrow(/rbac\/1 .* changed after it was applied/);
  });

  it("rolls back a failing migration and records nothing", async () => {
    const dir = await mkdtemp(join(tmpdir(), "svc-mig-"));
    dirs.push(dir);
    await writeFile(
      join(dir, "0001_bad.sql"),
      "CREATE TABLE public.half_done (n int); SELECT no_such_function();",
    );
    await expect(migrate(h.db.url, [{ service: "bad-mig", directory: dir }])).rejects.toThrow(/failed/);
    expect(await h.sql("SELECT to_regclass('public.half_done') AS t")).toEqual([{ t: null }]);
    expect(await h.sql("SELECT * FROM public.svc_schema_migrations WHERE service = 'bad-mig'")).toEqual([]);
  });
});
