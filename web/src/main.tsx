// The dashboard's shell: who is signed in, the navigation, and which page a path shows.
import { render } from "preact";
import { useEffect } from "preact/hooks";
import { type Me, get, setCsrfToken } from "./api";
import { AccountPage } from "./pages/account";
import { ActivityPage } from "./pages/activity";
import { ApplicationPage } from "./pages/application";
import { ApplicationsPage } from "./pages/applications";
import { DeploymentPage } from "./pages/deployment";
import { KeysPage } from "./pages/keys";
import { MembersPage } from "./pages/members";
import { RegistryPage } from "./pages/registry";
import { ServersPage } from "./pages/servers";
import { onLinkClick, useLocation } from "./router";
import { WhoContext, whoOf } from "./session";
import "./style.css";
import { ErrorNote, Loading, useLoad } from "./ui";

const NAV = [
  { href: "/app/servers", label: "Servers" },
  { href: "/app/applications", label: "Applications" },
  { href: "/app/keys", label: "API Keys" },
  { href: "/app/registry", label: "Registry credentials" },
  { href: "/app/activity", label: "Activity" },
  { href: "/app/members", label: "Members", owner: true },
  { href: "/app/account", label: "Account" },
];

function route(path: string) {
  const parts = path
    .replace(/^\/app\/?/, "")
    .split("/")
    .filter(Boolean)
    .map(decodeURIComponent);
  const [section, id, sub, subId] = parts;
  switch (section) {
    case undefined:
    case "servers":
      return <ServersPage />;
    case "applications":
      if (id && sub === "deployments" && subId) return <DeploymentPage appId={id} deploymentId={subId} />;
      return id ? <ApplicationPage id={id} /> : <ApplicationsPage />;
    case "keys":
      return <KeysPage tab={id === "automation" ? "automation" : "api"} />;
    case "registry":
      return <RegistryPage />;
    case "activity":
      return <ActivityPage />;
    case "members":
      return <MembersPage />;
    case "account":
      return <AccountPage />;
    default:
      return (
        <>
          <h1>Page not found</h1>
          <p>
            There is no page at this address. Go to <a href="/app/servers">Servers</a>.
          </p>
        </>
      );
  }
}

function Shell() {
  const me = useLoad(() => get<Me>("/api/me"), []);
  const loc = useLocation();
  // Move focus to the new page's heading so screen readers announce it.
  // biome-ignore lint/correctness/useExhaustiveDependencies: runs on each navigation, on purpose
  useEffect(() => {
    document.getElementById("page-title")?.focus({ preventScroll: true });
  }, [loc.pathname]);
  if (!me.data)
    return (
      <main id="main" class="boot">
        {me.loading ? <Loading what="your account" /> : <ErrorNote message={me.error} />}
      </main>
    );
  const who = whoOf(me.data);
  setCsrfToken(who.csrf);
  const current = loc.pathname === "/app/" || loc.pathname === "/app" ? "/app/servers" : loc.pathname;
  return (
    <WhoContext.Provider value={who}>
      {/* biome-ignore lint/a11y/useKeyWithClickEvents: delegation for in-app links; keys follow the links natively */}
      <div class="layout" onClick={onLinkClick}>
        <a class="skip" href="#main">
          Skip to content
        </a>
        <header class="top">
          <a class="brand" href="/app/servers">
            relayctl
          </a>
          <span class="org">{who.tenantName}</span>
          <form method="post" action="/logout" class="signout">
            <input type="hidden" name="csrf_token" value={who.csrf} />
            <span class="hint">{who.email}</span>
            <button type="submit">Sign out</button>
          </form>
        </header>
        <nav aria-label="Main" class="nav">
          <ul>
            {NAV.filter((n) => !n.owner || who.may("POST /api/users/invites")).map((n) => (
              <li key={n.href}>
                <a href={n.href} aria-current={current.startsWith(n.href) ? "page" : undefined}>
                  {n.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <main id="main" class="main">
          {route(loc.pathname)}
        </main>
      </div>
    </WhoContext.Provider>
  );
}

const root = document.getElementById("root")!;
// The boot message of index.html goes: render() appends to what is there.
root.textContent = "";
render(<Shell />, root);
