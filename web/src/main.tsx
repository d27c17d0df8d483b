// The dashboard's shell: who is signed in, the navigation, and which page a path shows.
import { type ComponentChildren, render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { type Me, get, setCsrfToken } from "./api";
import { AccountPage } from "./pages/account";
import { ActivityPage } from "./pages/activity";
import { ApplicationPage } from "./pages/application";
import { ApplicationsPage } from "./pages/applications";
import { AuditPage } from "./pages/audit";
import { DeploymentPage } from "./pages/deployment";
import { ForgesPage } from "./pages/forges";
import { GitHubPage } from "./pages/github";
import { KeysPage } from "./pages/keys";
import { MembersPage } from "./pages/members";
import { RegistryPage } from "./pages/registry";
import { RolloutPage } from "./pages/rollout";
import { ServerPage } from "./pages/server";
import { ServersPage } from "./pages/servers";
import { HOME, type PagePath, matchPage } from "./paths";
import { onLinkClick, useLocation } from "./router";
import { WhoContext, whoOf } from "./session";
import "./style.css";
import { ErrorNote, Loading, Page, useLoad } from "./ui";

const NAV = [
  { href: "/app/servers", label: "Servers" },
  { href: "/app/applications", label: "Applications" },
  { href: "/app/keys", label: "API Keys" },
  { href: "/app/registry", label: "Registry credentials" },
  { href: "/app/github", label: "GitHub" },
  { href: "/app/forges", label: "Git hosts" },
  { href: "/app/activity", label: "Activity" },
  { href: "/app/audit", label: "Audit log" },
  { href: "/app/members", label: "Members", owner: true },
  { href: "/app/account", label: "Account" },
];

// Each page path (paths.ts) and what it shows; tsc makes this cover exactly PAGE_PATHS.
const PAGES: { [P in PagePath]: (p: Record<string, string>) => ComponentChildren } = {
  "/app/servers": () => <ServersPage />,
  "/app/servers/:id": (p) => <ServerPage id={p.id} />,
  "/app/applications": () => <ApplicationsPage />,
  "/app/applications/:id": (p) => <ApplicationPage id={p.id} />,
  "/app/applications/:id/deployments/:deploymentId": (p) => (
    <DeploymentPage appId={p.id} deploymentId={p.deploymentId} />
  ),
  "/app/applications/:id/rollouts/:rolloutId": (p) => <RolloutPage appId={p.id} rolloutId={p.rolloutId} />,
  "/app/keys": () => <KeysPage tab="api" />,
  "/app/keys/automation": () => <KeysPage tab="automation" />,
  "/app/registry": () => <RegistryPage />,
  "/app/activity": () => <ActivityPage />,
  "/app/audit": () => <AuditPage />,
  "/app/members": () => <MembersPage />,
  "/app/account": () => <AccountPage />,
  "/app/github": () => <GitHubPage />,
  "/app/forges": () => <ForgesPage />,
};

function route(path: string) {
  const match = matchPage(path);
  if (match) return PAGES[match.path](match.params);
  return (
    <Page title="Page not found">
      <p>
        There is no page at <span class="mono">{path}</span>. Go to <a href={HOME}>Servers</a>.
      </p>
    </Page>
  );
}

/** The sign-out form (a POST with the session's CSRF token), with who is signed in. */
function SignOut({ csrf, email, class: cls }: { csrf: string; email: string; class: string }) {
  return (
    <form method="post" action="/logout" class={cls}>
      <input type="hidden" name="csrf_token" value={csrf} />
      <span class="hint">{email}</span>
      <button type="submit">Sign out</button>
    </form>
  );
}

function Shell() {
  const me = useLoad(() => get<Me>("/api/me"), []);
  const loc = useLocation();
  // At phone width the navigation is a menu behind a button; a page opened closes it.
  const [menuOpen, setMenuOpen] = useState(false);
  const menuButton = useRef<HTMLButtonElement>(null);
  // biome-ignore lint/correctness/useExhaustiveDependencies: closes on each navigation, on purpose
  useEffect(() => setMenuOpen(false), [loc.pathname]);
  const menuKey = (e: KeyboardEvent) => {
    if (e.key !== "Escape" || !menuOpen) return;
    setMenuOpen(false);
    menuButton.current?.focus();
  };
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
          <SignOut csrf={who.csrf} email={who.email} class="signout" />
          <button
            type="button"
            class="menu-toggle"
            ref={menuButton}
            aria-expanded={menuOpen}
            aria-controls="main-nav"
            onClick={() => setMenuOpen((open) => !open)}
          >
            <svg aria-hidden="true" viewBox="0 0 16 16" width="16" height="16">
              <path d="M1 3h14M1 8h14M1 13h14" stroke="currentColor" stroke-width="2" />
            </svg>
            Menu
          </button>
        </header>
        <nav
          id="main-nav"
          aria-label="Main"
          class={menuOpen ? "nav open" : "nav"}
          onKeyDown={menuKey}
          onClick={(e) => (e.target as Element).closest("a") && setMenuOpen(false)}
        >
          <ul>
            {NAV.filter((n) => !n.owner || who.may("POST /api/users/invites")).map((n) => (
              <li key={n.href}>
                <a href={n.href} aria-current={current.startsWith(n.href) ? "page" : undefined}>
                  {n.label}
                </a>
              </li>
            ))}
          </ul>
          {/* On a phone the header has room for the menu only: who and Sign out are in it. */}
          <div class="nav-account">
            <p class="hint">{who.tenantName}</p>
            <SignOut csrf={who.csrf} email={who.email} class="signout-menu" />
          </div>
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
