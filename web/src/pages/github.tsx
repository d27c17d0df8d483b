// An application's GitHub repository (the GitHub App): which repository it is linked
// to and whether a push can deploy it, linking one the organization's installations
// reach, unlinking. On a control plane without the App (GET /api/github/app), owners
// are told what the operator sets; others only that pushes do not deploy, with no
// error: it is a setting, not a fault (issue 31). GitHubPage (/app/github) is where
// the App's setup URL sends the browser back after an install, with what happened.
import { del, get, request } from "../api";
import { useLocation } from "../router";
import { useWho } from "../session";
import { ConfirmButton, Empty, ErrorNote, Form, Loading, Page, useLoad } from "../ui";
import { appBase } from "./application";

interface Link {
  repository_id: number | null;
  full_name?: string | null;
  deployable: boolean;
  reason: string | null;
}

interface Installation {
  installation_id: number;
  account: string;
  suspended?: boolean;
  uninstalled?: boolean;
  repositories: { repository_id: number; full_name: string }[];
}

interface AppStatus {
  configured: boolean;
  /** To owners, when not configured: the settings that turn it on. */
  settings?: string[];
}

export function GitHubRepository({ appId }: { appId: string }) {
  const status = useLoad(() => get<AppStatus>("/api/github/app"), []);
  if (status.loading && !status.data) return <Loading what="the GitHub settings" />;
  if (!status.data) return <ErrorNote message={status.error} />;
  if (!status.data.configured) return <NotConfigured settings={status.data.settings} />;
  return <Linked appId={appId} />;
}

function NotConfigured({ settings }: { settings?: string[] }) {
  if (!settings) return <p class="hint">Pushes to GitHub do not deploy applications here.</p>;
  return (
    <div class="hint">
      <p>
        The GitHub App is not set up on this control plane, so pushes do not deploy. To turn it on, create a
        GitHub App and give the control plane its settings:
      </p>
      <ul>
        {settings.map((s) => (
          <li key={s}>
            <code>{s}</code>
          </li>
        ))}
      </ul>
      <p>
        Then restart it. <code>docs/github-app.md</code> walks through it.
      </p>
    </div>
  );
}

function Linked({ appId }: { appId: string }) {
  const who = useWho();
  const path = `${appBase(who.tenantId, appId)}/github-repository`;
  const link = useLoad(() => get<Link>(path), [path]);
  const installs = useLoad(() => get<{ installations: Installation[] }>("/api/github/installations"), []);
  if (link.loading && !link.data) return <Loading what="the GitHub link" />;
  if (!link.data) return <ErrorNote message={link.error} />;
  const l = link.data;
  const repos = (installs.data?.installations ?? []).flatMap((i) => i.repositories);
  return (
    <>
      {l.repository_id === null ? (
        <p>Not linked: pushes to GitHub do not deploy this application.</p>
      ) : (
        <p>
          Linked to{" "}
          <a href={`https://github.com/${l.full_name}`} rel="noreferrer">
            {l.full_name}
          </a>
          {l.deployable
            ? ": a push to the deploy branch deploys it."
            : `, but it cannot deploy: ${l.reason}.`}
        </p>
      )}
      {repos.length === 0 ? (
        <p class="hint">
          No repository is reachable: install the GitHub App on your account or organization first, from the{" "}
          <a href="/app/github">GitHub page</a>.
        </p>
      ) : (
        <Form
          label="Link a GitHub repository"
          submit="Link repository"
          onSubmit={async (f) => {
            const id = Number((f.elements.namedItem("repository_id") as HTMLSelectElement).value);
            await request("PUT", path, { repository_id: id });
            link.reload();
          }}
        >
          <label>
            Repository
            <select name="repository_id" value={l.repository_id ?? undefined}>
              {repos.map((r) => (
                <option key={r.repository_id} value={r.repository_id}>
                  {r.full_name}
                </option>
              ))}
            </select>
          </label>
        </Form>
      )}
      {l.repository_id !== null && (
        <ConfirmButton
          label="Unlink"
          question="Unlink the repository? Pushes stop deploying this application."
          confirm="Unlink repository"
          action={async () => {
            await del(path);
            link.reload();
          }}
        />
      )}
    </>
  );
}

/**
 * The organization's GitHub installations and their repositories, an owner's
 * install link, and what the setup URL said after an install (?installed=…&account=…,
 * or ?error=… when it refused).
 */
export function GitHubPage() {
  const q = useLocation().searchParams;
  const status = useLoad(() => get<AppStatus>("/api/github/app"), []);
  const installed = q.get("installed");
  return (
    <Page title="GitHub">
      {installed && (
        <output class="ok-note" data-testid="github-installed">
          The GitHub App is installed on {q.get("account") || `installation ${installed}`} and belongs to this
          organization. Link an application to one of its repositories from the application's page.
        </output>
      )}
      <ErrorNote message={q.get("error") ?? undefined} />
      {status.loading && !status.data ? (
        <Loading what="the GitHub settings" />
      ) : !status.data ? (
        <ErrorNote message={status.error} />
      ) : !status.data.configured ? (
        <NotConfigured settings={status.data.settings} />
      ) : (
        <Installations />
      )}
    </Page>
  );
}

function Installations() {
  const who = useWho();
  const list = useLoad(() => get<{ installations: Installation[] }>("/api/github/installations"), []);
  if (list.loading && !list.data) return <Loading what="the GitHub installations" />;
  if (!list.data) return <ErrorNote message={list.error} />;
  return (
    <>
      {list.data.installations.length === 0 ? (
        <Empty>The GitHub App is not installed for this organization yet.</Empty>
      ) : (
        <ul>
          {list.data.installations.map((i) => (
            <li key={i.installation_id}>
              <strong>{i.account}</strong>
              {i.uninstalled ? " (uninstalled)" : i.suspended ? " (suspended)" : ""}:{" "}
              {i.repositories.length === 0
                ? "no repositories"
                : i.repositories.map((r) => r.full_name).join(", ")}
            </li>
          ))}
        </ul>
      )}
      {who.may("POST /api/github/install-link") && (
        <Form
          label="Install the GitHub App"
          submit="Install on GitHub"
          onSubmit={async () => {
            // GitHub sends the browser back to the setup URL, which returns here.
            const link = await request<{ url: string }>("POST", "/api/github/install-link");
            location.assign(link.url);
          }}
        >
          <p class="hint">
            Choose the account or organization and its repositories on GitHub; you come back here signed in.
          </p>
        </Form>
      )}
    </>
  );
}
