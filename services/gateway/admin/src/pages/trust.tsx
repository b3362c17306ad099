import { call } from "../api.js";
import { Problem, Table, useLoad, when } from "../ui.js";

/**
 * The plugins' signature report, the trusted signers and the lifecycle audit (parts of the Plugins page);
 * read again whenever `revision` changes (an install or a lifecycle move on the page).
 */
export function Trust({ revision }: { revision: number }) {
  const report = useLoad(() => call("plugins.signature-report"), [revision]);
  const signers = useLoad(() => call("signers.list"));
  const audit = useLoad(() => call("plugins.audit", { query: { limit: 20 } }), [revision]);
  return (
    <>
      <h2>Trust</h2>
      <Problem text={report.error ?? signers.error} />
      <Table
        caption={`Signature report${report.data ? ` (checked ${when(report.data.checkedAtUtc)})` : ""}`}
        rows={report.data?.items ?? []}
        empty={report.loading ? "Loading…" : "No packages to report on."}
        columns={[
          ["Plugin", (r) => <code>{r.pluginId}</code>],
          ["Version", (r) => r.version],
          ["Status", (r) => r.status],
          ["Reason", (r) => r.reason ?? ""],
        ]}
      />
      <Table
        caption="Trusted signers"
        rows={signers.data ?? []}
        empty={signers.loading ? "Loading…" : "No trusted signer is configured."}
        columns={[
          ["Publisher", (s) => s.publisherId],
          ["Name", (s) => s.displayName],
          ["Fingerprint", (s) => <code class="secret">{s.fingerprint}</code>],
          ["Revoked", (s) => (s.revoked ? "revoked" : "no")],
        ]}
      />
      <Problem text={audit.error} />
      <Table
        caption="Audit, newest first"
        rows={audit.data?.items ?? []}
        empty={audit.loading ? "Loading…" : "Nothing audited yet."}
        columns={[
          ["When", (a) => when(a.atUtc)],
          ["Who", (a) => a.actorName ?? a.actor],
          ["Action", (a) => a.action],
          ["Plugin", (a) => (a.pluginId === null ? "–" : `${a.pluginId} ${a.version ?? ""}`)],
          ["Outcome", (a) => (a.outcome === "failed" ? `failed: ${a.reason ?? ""}` : a.outcome)],
        ]}
      />
    </>
  );
}
