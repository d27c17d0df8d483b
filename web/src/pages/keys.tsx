// API Keys, two tabs: regular API keys (rck_, full access to the organization) and
// automation keys (rca_, for CI, with every scope of the contract). A new key's
// secret is shown once; revoking asks first and takes effect at the key's next request.
// Every key shows when it was last used. An automation key's operations are an
// explicit choice, "All operations" or a selection: an empty selection meaning
// "everything" was too easy to give by leaving the boxes alone (issue 31).
import { useState } from "preact/hooks";
import {
  type ApiKey,
  type AutomationKey,
  OPERATIONS,
  type RegistryCredential,
  type Server,
  del,
  get,
  post,
} from "../api";
import { navigate } from "../router";
import { useWho } from "../session";
import { Table } from "../table";
import {
  ConfirmButton,
  Empty,
  Form,
  Page,
  Resource,
  SecretOnce,
  Time,
  checked,
  field,
  lines,
  useLoad,
} from "../ui";

type Tab = "api" | "automation";

function Tabs({ tab }: { tab: Tab }) {
  const tabs: [Tab, string, string][] = [
    ["api", "API Keys", "/app/keys"],
    ["automation", "Automation Keys", "/app/keys/automation"],
  ];
  const onKey = (e: KeyboardEvent) => {
    if (e.key !== "ArrowRight" && e.key !== "ArrowLeft") return;
    const next = tabs[(tabs.findIndex(([t]) => t === tab) + 1) % tabs.length]!;
    navigate(next[2], true);
    requestAnimationFrame(() => document.getElementById(`tab-${next[0]}`)?.focus());
  };
  return (
    <div role="tablist" aria-label="Key types" class="tabs" onKeyDown={onKey}>
      {tabs.map(([t, label, href]) => (
        <a
          key={t}
          id={`tab-${t}`}
          role="tab"
          href={href}
          aria-selected={t === tab}
          aria-controls={`panel-${t}`}
          tabIndex={t === tab ? 0 : -1}
        >
          {label}
        </a>
      ))}
    </div>
  );
}

function ApiKeys({ owner }: { owner: boolean }) {
  const keys = useLoad(() => get<{ api_keys: ApiKey[] }>("/api/api-keys"), []);
  const [created, setCreated] = useState<ApiKey>();
  return (
    <>
      <p class="hint">
        API keys (<code>rck_</code>) manage the organization over the API with an <code>X-API-Key</code>{" "}
        header: full access, no expiry. For CI, use an automation key.
      </p>
      {owner && (
        <section class="card" aria-labelledby="new-api-key">
          <h2 id="new-api-key">New API key</h2>
          {created?.key ? (
            <>
              <SecretOnce label="API key" value={created.key} />
              <button type="button" onClick={() => setCreated(undefined)}>
                Done
              </button>
            </>
          ) : (
            <Form
              label="New API key"
              submit="Create API key"
              onSubmit={async (f) => {
                setCreated(await post<ApiKey>("/api/api-keys", { name: field(f, "name") }));
                keys.reload();
              }}
            >
              <label>
                Name
                <input name="name" required maxLength={128} autoComplete="off" />
              </label>
            </Form>
          )}
        </section>
      )}
      <Resource r={keys} what="API keys">
        {({ api_keys }) =>
          api_keys.length === 0 ? (
            <Empty>
              <p>No API keys. Create one above to manage the organization from scripts.</p>
            </Empty>
          ) : (
            <Table
              label="API keys"
              rows={api_keys}
              rowKey={(k) => k.id}
              columns={[
                { head: "Name", cell: (k) => k.name },
                { head: "Created", cell: (k) => <Time iso={k.created_at} /> },
                { head: "Last used", cell: (k) => <Time iso={k.last_used_at} /> },
                {
                  head: "Actions",
                  hideHead: true,
                  cell: (k) =>
                    owner && (
                      <ConfirmButton
                        label="Revoke"
                        title={`Revoke ${k.name}`}
                        question={`Revoke the API key ${k.name}? Its next request is refused.`}
                        confirm="Revoke key"
                        action={async () => {
                          await del(`/api/api-keys/${k.id}`);
                          keys.reload();
                        }}
                      />
                    ),
                },
              ]}
            />
          )
        }
      </Resource>
    </>
  );
}

/** The operations of the form: [] (the API's "all") only when "All operations" was chosen. */
function chosenOperations(f: HTMLFormElement): string[] {
  const mode = f.querySelector<HTMLInputElement>('input[name="operations_mode"]:checked')?.value;
  if (mode === "all") return [];
  const ops = checked(f, "operations");
  if (mode === "some" && ops.length > 0) return ops;
  throw new Error(
    mode === "some"
      ? "Tick at least one operation, or choose All operations."
      : "Choose which operations the key may run: All operations, or only some.",
  );
}

function scopeBody(f: HTMLFormElement): Record<string, unknown> {
  const body: Record<string, unknown> = {
    name: field(f, "name"),
    servers: checked(f, "servers"),
    operations: chosenOperations(f),
    allowed_credential_ids: checked(f, "allowed_credential_ids"),
    ip_allowlist: lines(field(f, "ip_allowlist")),
  };
  const rate = field(f, "rate_limit");
  if (rate) body.rate_limit = Number(rate);
  const expires = field(f, "expires_at");
  // datetime-local is the person's local time; the API wants ISO 8601 with a zone.
  if (expires) body.expires_at = new Date(expires).toISOString();
  return body;
}

function Checks({
  name,
  legend,
  hint,
  items,
}: { name: string; legend: string; hint: string; items: [string, string][] }) {
  return (
    <fieldset>
      <legend>{legend}</legend>
      <p class="hint">{hint}</p>
      {items.length === 0 && <p class="hint">None yet.</p>}
      <div class="checks">
        {items.map(([value, label]) => (
          <label key={value} class="check">
            <input type="checkbox" name={name} value={value} /> {label}
          </label>
        ))}
      </div>
    </fieldset>
  );
}

/**
 * "All operations" or a selection, one of them chosen on purpose. Ticking an operation
 * chooses the selection; "All operations" leaves the boxes aside.
 */
function OperationsChoice() {
  const [mode, setMode] = useState<"all" | "some">();
  return (
    <fieldset>
      <legend>Operations</legend>
      <p class="hint">Choose one: every operation, or only those ticked.</p>
      <div class="checks">
        <label class="check">
          <input
            type="radio"
            name="operations_mode"
            value="all"
            checked={mode === "all"}
            onChange={() => setMode("all")}
          />{" "}
          All operations, including ones added later
        </label>
        <label class="check">
          <input
            type="radio"
            name="operations_mode"
            value="some"
            checked={mode === "some"}
            onChange={() => setMode("some")}
          />{" "}
          Only the operations ticked below
        </label>
      </div>
      <div class="checks">
        {OPERATIONS.map((o) => (
          <label key={o} class="check">
            <input
              type="checkbox"
              name="operations"
              value={o}
              disabled={mode === "all"}
              onChange={() => setMode("some")}
            />{" "}
            {o}
          </label>
        ))}
      </div>
    </fieldset>
  );
}

function NewAutomationKey({ onCreated }: { onCreated: (k: AutomationKey) => void }) {
  const servers = useLoad(() => get<{ servers: Server[] }>("/api/servers"), []);
  const creds = useLoad(
    () => get<RegistryCredential[] | { credentials: RegistryCredential[] }>("/api/registry-credentials"),
    [],
  );
  const credList = Array.isArray(creds.data) ? creds.data : (creds.data?.credentials ?? []);
  return (
    <Form
      label="New automation key"
      submit="Create automation key"
      onSubmit={async (f) => onCreated(await post<AutomationKey>("/api/automation-keys", scopeBody(f)))}
    >
      <label>
        Name
        <input name="name" required maxLength={128} autoComplete="off" />
      </label>
      <OperationsChoice />
      <Checks
        name="servers"
        legend="Servers"
        hint="None checked: every server of the organization."
        items={(servers.data?.servers ?? []).map((s) => [s.id, s.name])}
      />
      <Checks
        name="allowed_credential_ids"
        legend="Registry credentials it may log in with"
        hint="None checked: any."
        items={credList.map((c) => [c.id, c.name])}
      />
      <div class="grid">
        <label>
          IP allowlist (addresses or CIDR ranges, one per line; empty: any)
          <textarea name="ip_allowlist" rows={2} spellcheck={false} />
        </label>
        <label>
          Rate limit (requests a minute, 1–1000)
          <input name="rate_limit" type="number" min={1} max={1000} placeholder="100" />
        </label>
        <label>
          Expires (optional)
          <input name="expires_at" type="datetime-local" />
        </label>
      </div>
    </Form>
  );
}

function scopeText(k: AutomationKey, servers: Map<string, string>): string {
  const ops = k.operations.length ? k.operations.join(", ") : "all operations";
  const srv = k.servers.length ? k.servers.map((s) => servers.get(s) ?? s).join(", ") : "all servers";
  const ips = k.ip_allowlist.length ? `; from ${k.ip_allowlist.join(", ")}` : "";
  return `${ops}; ${srv}${ips}; ${k.rate_limit}/min`;
}

function AutomationKeys({ owner }: { owner: boolean }) {
  const keys = useLoad(
    () => get<{ keys?: AutomationKey[]; automation_keys?: AutomationKey[] }>("/api/automation-keys"),
    [],
  );
  const servers = useLoad(() => get<{ servers: Server[] }>("/api/servers"), []);
  const names = new Map((servers.data?.servers ?? []).map((s) => [s.id, s.name]));
  const [created, setCreated] = useState<AutomationKey>();
  return (
    <>
      <p class="hint">
        Automation keys (<code>rca_</code>) let CI call the Automation API with{" "}
        <code>Authorization: Bearer</code>, held to their scopes.
      </p>
      {owner && (
        <section class="card" aria-labelledby="new-rca">
          <h2 id="new-rca">New automation key</h2>
          {created?.key ? (
            <>
              <SecretOnce label="Automation key" value={created.key} />
              <button type="button" onClick={() => setCreated(undefined)}>
                Done
              </button>
            </>
          ) : (
            <NewAutomationKey
              onCreated={(k) => {
                setCreated(k);
                keys.reload();
              }}
            />
          )}
        </section>
      )}
      <Resource r={keys} what="automation keys">
        {(data) => {
          const list = data.keys ?? data.automation_keys ?? [];
          return list.length === 0 ? (
            <Empty>
              <p>No automation keys. Create one above and store it as a secret of your CI.</p>
            </Empty>
          ) : (
            <Table
              label="Automation keys"
              rows={list}
              rowKey={(k) => k.id}
              columns={[
                { head: "Name", cell: (k) => k.name },
                { head: "Scope", cell: (k) => scopeText(k, names) },
                { head: "Expires", cell: (k) => (k.expires_at ? <Time iso={k.expires_at} /> : "never") },
                { head: "Created", cell: (k) => <Time iso={k.created_at} /> },
                { head: "Last used", cell: (k) => <Time iso={k.last_used_at} /> },
                {
                  head: "Actions",
                  hideHead: true,
                  cell: (k) =>
                    owner && (
                      <ConfirmButton
                        label="Revoke"
                        title={`Revoke ${k.name}`}
                        question={`Revoke the automation key ${k.name}? Its next request is refused (401).`}
                        confirm="Revoke key"
                        action={async () => {
                          await del(`/api/automation-keys/${k.id}`);
                          keys.reload();
                        }}
                      />
                    ),
                },
              ]}
            />
          );
        }}
      </Resource>
    </>
  );
}

export function KeysPage({ tab }: { tab: Tab }) {
  const owner = useWho().may("POST /api/api-keys");
  return (
    <Page title="API Keys">
      <Tabs tab={tab} />
      <div role="tabpanel" id={`panel-${tab}`} aria-labelledby={`tab-${tab}`}>
        {tab === "api" ? <ApiKeys owner={owner} /> : <AutomationKeys owner={owner} />}
      </div>
    </Page>
  );
}
