// An application's previews (issue 32): its settings (preview-settings.tsx), the list of
// its preview environments (URL, pull request, source, head, status, last deployment, a
// Remove with confirm), a new preview from a ref or an image, and the values previews get
// instead of production's (the preview env). A preview's own page is the application
// page, which says what it previews (PreviewOf) and links back.
import { useState } from "preact/hooks";
import { type Application, type Preview, del, get, post, put } from "../api";
import { useWho } from "../session";
import { Table } from "../table";
import { AppUrl, Badge, ConfirmButton, Empty, Form, Resource, Time, field, useLoad } from "../ui";
import { EnvEditor } from "./app-env";
import { PreviewSettingsForm } from "./preview-settings";

/** The preview routes as the control plane declares them (what `who.may` is asked about). */
export const PREVIEWS_ROUTE = "/api/applications/:id/previews";
const PREVIEW_ENV_ROUTE = "/api/applications/:id/preview-env";

export const previewsOf = (appId: string) => `/api/applications/${encodeURIComponent(appId)}/previews`;

/** Where the preview comes from: its pull request (linked), or made through the API. */
function Source({ p }: { p: Preview }) {
  const what = p.number === null ? p.source : `${p.source} PR #${p.number}`;
  return (
    <>
      {p.pull_request_url ? <a href={p.pull_request_url}>{what}</a> : what}
      {p.from_fork ? <span class="hint"> (fork)</span> : null}
    </>
  );
}

function Head({ p }: { p: Preview }) {
  if (p.image) return <span class="mono">{p.image}</span>;
  return (
    <>
      <span class="mono">{p.head_ref}</span>
      {p.head_sha ? <span class="hint mono"> {p.head_sha.slice(0, 10)}</span> : null}
    </>
  );
}

function LastDeploy({ p }: { p: Preview }) {
  const d = p.last_deployment;
  if (!d) return <>never</>;
  return (
    <>
      <Badge status={d.status} />{" "}
      <a href={`/app/applications/${p.id}/deployments/${d.deployment_id}`}>
        <Time iso={d.created_at} />
      </a>
    </>
  );
}

function NewPreview({ app, onMade }: { app: Application; onMade: (p: Preview) => void }) {
  return (
    <Form
      label="New preview"
      submit="Create preview"
      onSubmit={async (f) => {
        const ref = field(f, "ref");
        const image = field(f, "image");
        if (ref && image) throw new Error("Give a branch, tag or commit, or an image: not both.");
        const made = await post<{ preview: Preview }>(previewsOf(app.id), {
          name: field(f, "name"),
          ...(ref ? { ref } : {}),
          ...(image ? { image } : {}),
        });
        f.reset();
        onMade(made.preview);
      }}
    >
      <div class="grid">
        <label>
          Name
          <input name="name" required pattern="[a-z0-9][a-z0-9\-]*" maxLength={40} autoComplete="off" />
        </label>
        <label>
          Branch, tag or commit (optional)
          <input name="ref" placeholder={app.deploy_branch} autoComplete="off" spellcheck={false} />
        </label>
        <label>
          Or an image (instead of a build)
          <input
            name="image"
            placeholder="registry.example.com/app:pr-12"
            autoComplete="off"
            spellcheck={false}
          />
        </label>
      </div>
      <p class="hint">The same name again deploys that preview anew. Lower-case letters, digits and '-'.</p>
    </Form>
  );
}

export function Previews({ app, onSaved }: { app: Application; onSaved: () => void }) {
  const who = useWho();
  // Polled: a preview's deployment moves on, and pull requests open and close on their own.
  const list = useLoad(() => get<{ previews: Preview[] }>(previewsOf(app.id)), [app.id], 5000);
  const [made, setMade] = useState<Preview>();
  const enabled = app.previews?.enabled ?? false;
  return (
    <>
      <p class="hint">
        {enabled
          ? `Previews are on: at most ${app.previews?.max ?? 5}; the oldest idle one is stopped to make room.`
          : "Previews are off: pull requests get no preview, and none can be made here."}
      </p>
      {who.may("PATCH /api/applications/:id") && (
        <details>
          <summary>Preview settings</summary>
          <PreviewSettingsForm app={app} onSaved={onSaved} />
        </details>
      )}
      <Resource r={list} what="previews">
        {({ previews }) =>
          previews.length === 0 ? (
            <Empty>
              <p>No previews.</p>
            </Empty>
          ) : (
            <Table
              label="Preview environments"
              testId="previews"
              rows={previews}
              rowKey={(p) => p.id}
              rowAttrs={(p) => ({ "data-preview": p.key })}
              columns={[
                { head: "Name", cell: (p) => <a href={`/app/applications/${p.id}`}>{p.key}</a> },
                { head: "Status", cell: (p) => <Badge status={p.status} /> },
                { head: "URL", cell: (p) => <AppUrl url={p.url} /> },
                { head: "Source", cell: (p) => <Source p={p} /> },
                { head: "Head", cell: (p) => <Head p={p} /> },
                { head: "Last deployment", cell: (p) => <LastDeploy p={p} /> },
                {
                  head: "Remove",
                  hideHead: true,
                  cell: (p) =>
                    who.may(`DELETE ${PREVIEWS_ROUTE}/:preview_id`) && (
                      <ConfirmButton
                        label="Remove"
                        title={`Remove the preview ${p.key}`}
                        question={`Remove the preview ${p.key}? Its containers, images and route are removed from the server.`}
                        confirm="Remove preview"
                        action={async () => {
                          await del(`${previewsOf(app.id)}/${encodeURIComponent(p.id)}`);
                          list.reload();
                        }}
                      />
                    ),
                },
              ]}
            />
          )
        }
      </Resource>
      {enabled && who.may(`POST ${PREVIEWS_ROUTE}`) && (
        <NewPreview
          app={app}
          onMade={(p) => {
            setMade(p);
            list.reload();
          }}
        />
      )}
      <output class="hint">{made ? `Deploying the preview ${made.key}.` : ""}</output>
      <details>
        <summary>Preview environment variables</summary>
        <EnvEditor
          base={`/api/applications/${encodeURIComponent(app.id)}/preview-env`}
          label="Preview environment variables"
          formLabel="Set a preview environment variable"
          maySet={who.may(`PUT ${PREVIEW_ENV_ROUTE}`)}
          mayRemove={who.may(`DELETE ${PREVIEW_ENV_ROUTE}/:name`)}
          save={(variables) =>
            put(`/api/applications/${encodeURIComponent(app.id)}/preview-env`, { variables })
          }
          hint={
            app.previews?.copy_secrets
              ? "A preview gets these values for production's names, and production's value for a name set only there. Write-only."
              : "A preview gets these values for production's names; a name without a preview value is left out (production's values are not copied). Write-only."
          }
          empty="No preview values."
          removeNote="The next preview deployment runs without it."
        />
      </details>
    </>
  );
}

/** On a preview's own page: what it previews, linked, and its pull request. */
export function PreviewOf({ app }: { app: Application }) {
  const parentId = app.preview_of ?? "";
  const parent = useLoad(
    () => get<Application>(`/api/applications/${encodeURIComponent(parentId)}`),
    [parentId],
  );
  const preview = useLoad(
    () => get<Preview>(`${previewsOf(parentId)}/${encodeURIComponent(app.id)}`),
    [app.id],
  );
  const p = preview.data;
  return (
    <p class="preview-of" data-testid="preview-of">
      Preview of <a href={`/app/applications/${parentId}`}>{parent.data?.name ?? "its application"}</a>
      {p?.number != null && (
        <>
          {" · "}
          {p.pull_request_url ? <a href={p.pull_request_url}>PR #{p.number}</a> : `PR #${p.number}`}
        </>
      )}
      {p && p.number == null && <> · {p.key}</>}
    </p>
  );
}
