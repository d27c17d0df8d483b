// An application's environment variables: write-only (names and when they were set),
// set one, remove one. Values leave the page with the request and never come back.
import { del, get, post } from "../api";
import { useWho } from "../session";
import { ConfirmButton, Empty, Form, Resource, Time, field, useLoad } from "../ui";
import type { Application } from "../api";
import { APP_ROUTE, appBase } from "./app-paths";

interface EnvVar {
  name: string;
  updated_at: string;
}

export function Env({ app }: { app: Application }) {
  const who = useWho();
  const base = `${appBase(who.tenantId, app.id)}/env`;
  const vars = useLoad(() => get<{ variables: EnvVar[] }>(base), [app.id]);
  return (
    <>
      <p class="hint">
        Values are write-only: relayctl seals them and never shows them again. Set a name again to replace its
        value.
      </p>
      <Resource r={vars} what="environment variables">
        {({ variables }) =>
          variables.length === 0 ? (
            <Empty>
              <p>No environment variables. Add one below; it reaches the container at the next deployment.</p>
            </Empty>
          ) : (
            <ul class="list" aria-label="Environment variables">
              {variables.map((v) => (
                <li key={v.name}>
                  <span class="mono">{v.name}</span>
                  <span class="hint">
                    set <Time iso={v.updated_at} />
                  </span>
                  {who.may(`DELETE ${APP_ROUTE}/env/:name`) && (
                    <ConfirmButton
                      label="Remove"
                      title={`Remove ${v.name}`}
                      question={`Remove the variable ${v.name}? The next deployment runs without it.`}
                      confirm="Remove variable"
                      action={async () => {
                        await del(`${base}/${encodeURIComponent(v.name)}`);
                        vars.reload();
                      }}
                    />
                  )}
                </li>
              ))}
            </ul>
          )
        }
      </Resource>
      {who.may(`POST ${APP_ROUTE}/env`) && (
        <Form
          label="Set an environment variable"
          submit="Set variable"
          onSubmit={async (f) => {
            const value = (f.elements.namedItem("value") as HTMLInputElement).value;
            await post(base, { variables: { [field(f, "name")]: value } });
            // The value leaves the page with the request: nothing keeps it.
            f.reset();
            vars.reload();
          }}
        >
          <div class="grid">
            <label>
              Name
              <input
                name="name"
                required
                pattern="[A-Za-z_][A-Za-z0-9_]*"
                autoComplete="off"
                spellcheck={false}
              />
            </label>
            <label>
              Value
              <input name="value" type="password" required autoComplete="new-password" />
            </label>
          </div>
        </Form>
      )}
    </>
  );
}
