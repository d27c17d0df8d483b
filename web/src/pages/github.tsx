// An application's GitHub repository (the GitHub App): which repository it is linked
// to and whether a push can deploy it, linking one the organization's installations
// reach, unlinking. On a control plane without the App (GET /api/github/app), owners
// are told what the operator sets; others only that pushes do not deploy, with no
// error: it is a setting, not a fault (issue 31).
import { del, get, request } from "../api";
import { useWho } from "../session";
import { ConfirmButton, ErrorNote, Form, Loading, useLoad } from "../ui";
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
          No repository is reachable: install the GitHub App on your account or organization first.
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
