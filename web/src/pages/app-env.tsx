// Environment variables, write-only (names and when they were set), set one, remove one:
// an application's own (Env) and the values its previews get instead (app-previews.tsx),
// one editor for both. Values leave the page with the request and never come back.
import type { ComponentChildren } from "preact";
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
  return (
    <EnvEditor
      base={base}
      label="Environment variables"
      formLabel="Set an environment variable"
      maySet={who.may(`POST ${APP_ROUTE}/env`)}
      mayRemove={who.may(`DELETE ${APP_ROUTE}/env/:name`)}
      save={(variables) => post(base, { variables })}
      empty="No environment variables. Add one below; it reaches the container at the next deployment."
      removeNote="The next deployment runs without it."
    />
  );
}

/** The write-only list of `base` (GET: names), its Remove buttons (DELETE base/name) and a Set form. */
export function EnvEditor({
  base,
  label,
  formLabel,
  maySet,
  mayRemove,
  save,
  empty,
  removeNote,
  hint,
}: {
  base: string;
  label: string;
  formLabel: string;
  maySet: boolean;
  mayRemove: boolean;
  save: (variables: Record<string, string>) => Promise<unknown>;
  empty: string;
  removeNote: string;
  hint?: ComponentChildren;
}) {
  const vars = useLoad(() => get<{ variables: EnvVar[] }>(base), [base]);
  return (
    <>
      <p class="hint">
        {hint ??
          "Values are write-only: relayctl seals them and never shows them again. Set a name again to replace its value."}
      </p>
      <Resource r={vars} what={label.toLowerCase()}>
        {({ variables }) =>
          variables.length === 0 ? (
            <Empty>
              <p>{empty}</p>
            </Empty>
          ) : (
            <ul class="list" aria-label={label}>
              {variables.map((v) => (
                <li key={v.name}>
                  <span class="mono">{v.name}</span>
                  <span class="hint">
                    set <Time iso={v.updated_at} />
                  </span>
                  {mayRemove && (
                    <ConfirmButton
                      label="Remove"
                      title={`Remove ${v.name}`}
                      question={`Remove the variable ${v.name}? ${removeNote}`}
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
      {maySet && (
        <Form
          label={formLabel}
          submit="Set variable"
          onSubmit={async (f) => {
            const value = (f.elements.namedItem("value") as HTMLInputElement).value;
            await save({ [field(f, "name")]: value });
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
