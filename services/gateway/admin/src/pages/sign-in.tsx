import { useState } from "preact/hooks";

import { signIn } from "../api.js";
import { endedBecause, start } from "../session.js";
import { useSignal } from "../state.js";
import { describe, Field, fieldsOf, Problem } from "../ui.js";

/** Sign-in for the platform, or for one workspace when its key is given. */
export function SignIn() {
  const ended = useSignal(endedBecause);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  return (
    <main class="sign-in">
      <h1>svc admin</h1>
      <Problem text={ended} />
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const f = fieldsOf(e.currentTarget);
          setBusy(true);
          setError(null);
          signIn({
            username: f.username ?? "",
            password: f.password ?? "",
            ...(f.workspaceKey ? { workspaceKey: f.workspaceKey } : {}),
          }).then(
            (r) => start(r.accessToken),
            (err: unknown) => {
              setBusy(false);
              setError(describe(err));
            },
          );
        }}
      >
        <Field label="User name" name="username" />
        <Field label="Password" name="password" type="password" />
        <Field label="Workspace (empty: the platform)" name="workspaceKey" required={false} />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
      <Problem text={error} />
    </main>
  );
}
