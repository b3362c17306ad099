import { useState } from "preact/hooks";

import { call, type Reply } from "../api.js";
import { can } from "../session.js";
import { Action, describe, Field, fieldsOf, Page, Problem, Table, useLoad, when } from "../ui.js";

type Subscription = Reply<"webhooks.list">["items"][number];

/** A secret in the Standard Webhooks form: `whsec_` and the base64 of 32 random bytes. */
function newSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return `whsec_${btoa(String.fromCharCode(...bytes))}`;
}

/** Subscriptions (create with the event catalogue, the secret shown once) and each one's deliveries. */
export function Webhooks() {
  const subs = useLoad(() => call("webhooks.list", { query: { limit: 100 } }));
  const catalog = useLoad(() => (can("flow.read") ? call("events.catalog") : Promise.resolve([])));
  const [error, setError] = useState<string | null>(null);
  const [secret, setSecret] = useState<{ id: string; secret: string } | null>(null);
  const [open, setOpen] = useState<Subscription | null>(null);
  return (
    <Page title="Webhooks">
      <Problem text={error ?? subs.error} />
      {secret && (
        <div class="once" role="status">
          <p>
            The secret of subscription <code>{secret.id}</code>, shown this once: store it where the receiver
            verifies signatures.
          </p>
          <code class="secret">{secret.secret}</code>
        </div>
      )}
      <Table
        caption="Subscriptions"
        rows={subs.data?.items ?? []}
        empty={subs.loading ? "Loading…" : "No subscriptions."}
        columns={[
          ["Event", (s) => <code>{s.eventName}</code>],
          ["Target", (s) => s.targetUrl],
          ["Workspace", (s) => s.workspaceKey ?? "all (platform)"],
          ["Active", (s) => (s.isActive ? "yes" : "paused")],
          [
            "",
            (s) => (
              <span class="actions">
                <button type="button" onClick={() => setOpen(s)}>
                  Deliveries of {s.eventName} to {s.targetUrl}
                </button>
                <Action
                  label={`Rotate the secret of ${s.eventName} to ${s.targetUrl}`}
                  allowed={can("webhook.manage")}
                  run={async () => {
                    const rotated = await call("webhooks.rotate-secret", { params: { id: s.id } });
                    setSecret({ id: s.id, secret: rotated.secret });
                  }}
                  onDone={subs.reload}
                  onError={setError}
                />
                <Action
                  label={`${s.isActive ? "Pause" : "Resume"} ${s.eventName} to ${s.targetUrl}`}
                  allowed={can("webhook.manage")}
                  run={() =>
                    call("webhooks.activation", { params: { id: s.id }, query: { isActive: !s.isActive } })
                  }
                  onDone={subs.reload}
                  onError={setError}
                />
                <Action
                  label={`Delete ${s.eventName} to ${s.targetUrl}`}
                  danger
                  allowed={can("webhook.manage")}
                  run={async () => {
                    if (confirm(`Delete the subscription of ${s.eventName} to ${s.targetUrl}?`)) {
                      await call("webhooks.delete", { params: { id: s.id } });
                      if (open?.id === s.id) setOpen(null);
                    }
                  }}
                  onDone={subs.reload}
                  onError={setError}
                />
              </span>
            ),
          ],
        ]}
      />
      {can("webhook.manage") && (
        <form
          aria-label="New subscription"
          onSubmit={(e) => {
            e.preventDefault();
            const form = e.currentTarget;
            const f = fieldsOf(form);
            const chosen = newSecret();
            call("webhooks.create", {
              body: {
                eventName: f.eventName ?? "",
                targetUrl: f.targetUrl ?? "",
                secret: chosen,
                ...(f.workspaceKey ? { workspaceKey: f.workspaceKey } : {}),
              },
            }).then(
              (created) => {
                form.reset();
                setSecret({ id: created.id, secret: chosen });
                subs.reload();
              },
              (err: unknown) => setError(describe(err)),
            );
          }}
        >
          <h2>New subscription</h2>
          <Field label="Event (or *)" name="eventName" list="event-catalog" />
          <datalist id="event-catalog">
            {(catalog.data ?? []).map((e) => (
              <option key={e.eventName} value={e.eventName}>
                {e.description}
              </option>
            ))}
          </datalist>
          <Field
            label="Target URL"
            name="targetUrl"
            type="url"
            placeholder="https://receiver.example/hooks"
          />
          <Field label="Workspace (empty: every workspace)" name="workspaceKey" required={false} />
          <button type="submit">Create subscription</button>
        </form>
      )}
      {open && <Deliveries subscription={open} onError={setError} />}
    </Page>
  );
}

/** One delivery's attempts: when, how long, the answer's status and the start of its body, or the error. */
function Attempts({ subscriptionId, deliveryId }: { subscriptionId: string; deliveryId: string }) {
  const delivery = useLoad(
    () => call("webhooks.delivery", { params: { id: subscriptionId, deliveryId } }),
    [subscriptionId, deliveryId],
  );
  return (
    <>
      <Problem text={delivery.error} />
      <Table
        caption={`Attempts of delivery ${deliveryId}${delivery.data?.nextAttemptAtUtc ? ` (next at ${when(delivery.data.nextAttemptAtUtc)})` : ""}`}
        rows={delivery.data?.history ?? []}
        empty={delivery.loading ? "Loading…" : "No attempt reached the receiver yet."}
        columns={[
          ["Attempt", (a) => a.attempt],
          ["When", (a) => when(a.attemptedAtUtc)],
          ["Duration", (a) => `${a.durationMs} ms`],
          ["Outcome", (a) => a.outcome],
          ["Answer", (a) => (a.statusCode === null ? "–" : String(a.statusCode))],
          ["Body or error", (a) => <code>{a.error ?? a.responseExcerpt ?? ""}</code>],
        ]}
      />
    </>
  );
}

function Deliveries({ subscription, onError }: { subscription: Subscription; onError: (t: string) => void }) {
  const [shown, setShown] = useState<string | null>(null);
  const deliveries = useLoad(
    () => call("webhooks.deliveries", { params: { id: subscription.id }, query: { limit: 50 } }),
    [subscription.id],
  );
  const circuit = useLoad(
    () => call("webhooks.circuit", { params: { id: subscription.id } }),
    [subscription.id],
  );
  return (
    <section aria-labelledby="deliveries">
      <h2 id="deliveries">
        Deliveries of <code>{subscription.eventName}</code> to {subscription.targetUrl}
      </h2>
      <Problem text={deliveries.error} />
      <p role="status">
        {circuit.data
          ? `Circuit to ${circuit.data.origin}: ${circuit.data.state.replace("_", "-")}, ${circuit.data.consecutiveFailures} failures in a row (opens at ${circuit.data.threshold})${circuit.data.openUntilUtc ? `, open until ${when(circuit.data.openUntilUtc)}` : ""}.`
          : ""}
      </p>
      <button
        type="button"
        onClick={() => {
          deliveries.reload();
          circuit.reload();
        }}
      >
        Refresh deliveries
      </button>
      <Table
        caption="Deliveries, newest first"
        rows={deliveries.data?.items ?? []}
        empty={deliveries.loading ? "Loading…" : "No deliveries yet."}
        columns={[
          ["Delivery", (d) => <code>{d.deliveryId}</code>],
          ["Event", (d) => d.eventName],
          ["Status", (d) => d.status],
          ["Attempts", (d) => d.attempts],
          ["Last answer", (d) => (d.lastStatusCode === null ? "–" : String(d.lastStatusCode))],
          ["Updated", (d) => when(d.updatedAtUtc)],
          [
            "",
            (d) => (
              <button type="button" onClick={() => setShown(d.deliveryId)}>
                Attempts of {d.deliveryId}
              </button>
            ),
          ],
          [
            "",
            (d) => (
              <Action
                label={`Resend ${d.deliveryId}`}
                allowed={can("webhook.manage")}
                run={() =>
                  call("webhooks.resend", { params: { id: subscription.id, deliveryId: d.deliveryId } })
                }
                onDone={deliveries.reload}
                onError={onError}
              />
            ),
          ],
        ]}
      />
      {shown && <Attempts subscriptionId={subscription.id} deliveryId={shown} />}
    </section>
  );
}
