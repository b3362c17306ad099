/**
 * The admin console: a single-page app at /admin/, served by the gateway under its
 * Content-Security-Policy (this bundle and its stylesheet, no inline script). docs/adr/0016-admin-console.md
 * says why Preact, why the token is held in memory, and how the API client is typed by the contracts.
 */
import "./styles.css";

import { type ComponentType, render } from "preact";
import { useEffect } from "preact/hooks";

import { signOut, useTransport } from "./api.js";
import { ExtensionPage, extensions, loadExtensions, mayOpen } from "./extensions.js";
import { Configuration, Flows, Notifications } from "./pages/activity.js";
import { Chains } from "./pages/chains.js";
import { CustomFields } from "./pages/custom-fields.js";
import { Diagnostics } from "./pages/diagnostics.js";
import { Entitlements } from "./pages/entitlements.js";
import { Integrations } from "./pages/integrations.js";
import { Jobs } from "./pages/jobs.js";
import { Media } from "./pages/media.js";
import { Members } from "./pages/members.js";
import { Plugins } from "./pages/plugins.js";
import { Roles } from "./pages/roles.js";
import { SignIn } from "./pages/sign-in.js";
import { Surfaces } from "./pages/surfaces.js";
import { Tenants } from "./pages/tenants.js";
import { Themes } from "./pages/themes.js";
import { Users } from "./pages/users.js";
import { Webhooks } from "./pages/webhooks.js";
import { can, end, type Session, session } from "./session.js";
import { navigate, route, useSignal } from "./state.js";
import { Page } from "./ui.js";

interface Area {
  readonly path: string;
  readonly label: string;
  /** The key the area's list needs; the area is hidden without it. */
  readonly key: string;
  readonly page: ComponentType;
}

const AREAS: readonly Area[] = [
  { path: "/tenants", label: "Tenants and workspaces", key: "workspace.read", page: Tenants },
  { path: "/surfaces", label: "Surfaces and snippets", key: "workspace.read", page: Surfaces },
  { path: "/users", label: "Users", key: "user.read", page: Users },
  { path: "/members", label: "Members", key: "membership.read", page: Members },
  { path: "/roles", label: "Roles", key: "role.read", page: Roles },
  { path: "/integrations", label: "Integrations", key: "integration.read", page: Integrations },
  { path: "/plugins", label: "Plugins", key: "plugin.read", page: Plugins },
  { path: "/chains", label: "Plugin chains", key: "plugin.assign", page: Chains },
  { path: "/entitlements", label: "Entitlements", key: "plugin.read", page: Entitlements },
  { path: "/themes", label: "Themes", key: "extension.read", page: Themes },
  { path: "/webhooks", label: "Webhooks", key: "webhook.read", page: Webhooks },
  { path: "/flows", label: "Flows", key: "flow.read", page: Flows },
  { path: "/jobs", label: "Jobs", key: "job.read", page: Jobs },
  { path: "/notifications", label: "Notifications", key: "notification.read", page: Notifications },
  { path: "/custom-fields", label: "Custom fields", key: "customfield.read", page: CustomFields },
  { path: "/media", label: "Media", key: "media.read", page: Media },
  { path: "/configuration", label: "Configuration", key: "config.read", page: Configuration },
  { path: "/diagnostics", label: "Diagnostics", key: "diagnostics.record", page: Diagnostics },
];

useTransport({ token: () => session.get()?.token ?? null, expired: (reason) => end(reason) });

function Overview({ s }: { s: Session }) {
  const areas = AREAS.filter((a) => can(a.key));
  return (
    <Page title="Overview">
      <p>
        Signed in as <strong>{s.name}</strong>,{" "}
        {s.scope === "workspace" ? `in workspace ${s.workspaceKey ?? ""}` : "on the platform"}, until{" "}
        {new Date(s.expiresAtMs).toLocaleTimeString()}.
      </p>
      {areas.length === 0 ? (
        <p>Your session holds no key any area of the console needs.</p>
      ) : (
        <ul>
          {areas.map((a) => (
            <li key={a.path}>
              <a href={`/admin${a.path}`} onClick={follow(a.path)}>
                {a.label}
              </a>
            </li>
          ))}
        </ul>
      )}
    </Page>
  );
}

const follow = (path: string) => (e: MouseEvent) => {
  if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
  e.preventDefault();
  navigate(path);
};

function App() {
  const s = useSignal(session);
  const path = useSignal(route);
  const pluginPages = useSignal(extensions).filter((e) =>
    mayOpen(e.pluginId, s?.permissions ?? [], can("plugin.read")),
  );
  // The plugins' admin pages follow activations: the manifest is read again on every move.
  useEffect(() => {
    if (s !== null) void loadExtensions();
  }, [s, path]);
  if (s === null) return <SignIn />;
  if (path === "/login") {
    // The gateway sends sign-ins here (/admin/login); once signed in, the overview.
    navigate("/");
    return null;
  }
  const area = AREAS.find((a) => path === a.path || path.startsWith(`${a.path}/`));
  const Content = area?.page;
  const pluginPage = pluginPages.find((e) => path === `/extensions/${e.pluginId}`);
  return (
    <>
      <header>
        <a href="/admin/" class="brand" onClick={follow("/")}>
          svc admin
        </a>
        <span class="who">
          {s.name}
          {s.scope === "workspace" ? ` · ${s.workspaceKey ?? ""}` : ""}
        </span>
        <button type="button" onClick={() => void signOut().finally(() => end("You signed out."))}>
          Sign out
        </button>
      </header>
      <div class="layout">
        <nav aria-label="Areas">
          {AREAS.filter((a) => can(a.key)).map((a) => (
            <a
              key={a.path}
              href={`/admin${a.path}`}
              aria-current={area === a ? "page" : undefined}
              onClick={follow(a.path)}
            >
              {a.label}
            </a>
          ))}
          {pluginPages.map((e) => (
            <a
              key={e.pluginId}
              href={`/admin/extensions/${e.pluginId}`}
              aria-current={pluginPage === e ? "page" : undefined}
              onClick={follow(`/extensions/${e.pluginId}`)}
            >
              {e.pluginId}
            </a>
          ))}
        </nav>
        <main>
          {pluginPage !== undefined ? (
            <ExtensionPage extension={pluginPage} />
          ) : area === undefined ? (
            path === "/" ? (
              <Overview s={s} />
            ) : (
              <Page title="Not found">
                <p>No page of the console is at this address.</p>
              </Page>
            )
          ) : Content && can(area.key) ? (
            <Content />
          ) : (
            <Page title={area.label}>
              <p role="alert" class="problem">
                Not allowed: this page needs the key <code>{area.key}</code>, which your session lacks.
              </p>
            </Page>
          )}
        </main>
      </div>
    </>
  );
}

render(<App />, document.getElementById("app") as HTMLElement);
