// Account: the signed-in person's own web sessions (which browser, from where, last
// used when) and CLI/MCP logins, each revocable.
import { type Grant, type Session, del, get } from "../api";
import { useWho } from "../session";
import { ConfirmButton, Empty, Page, Resource, Time, useLoad } from "../ui";
import "./people.css";

/** "Firefox on macOS from 192.0.2.7": enough to tell one's sessions apart. */
const sessionName = (s: Session) => `${s.device ?? "a browser"} from ${s.ip}`;

export function AccountPage() {
  const who = useWho();
  const sessions = useLoad(() => get<{ sessions: Session[] }>("/api/me/sessions"), []);
  const grants = useLoad(() => get<{ grants: Grant[] }>("/api/me/grants"), []);
  return (
    <Page title="Account">
      <p>
        Signed in as <strong>{who.email}</strong> ({who.role}) in {who.tenantName}.
      </p>
      <section aria-labelledby="sessions-h">
        <h2 id="sessions-h">Browser sessions</h2>
        <Resource r={sessions} what="sessions">
          {({ sessions: list }) => (
            <ul class="list" aria-label="Browser sessions">
              {list.map((s) => (
                <li key={s.id}>
                  <span>
                    <span class="session-device">{s.device ?? "Unknown browser"}</span>
                    {s.current && <strong> (this browser)</strong>}
                    <br />
                    from <span class="mono">{s.ip}</span>, last used <Time iso={s.last_used_at} />, signed in{" "}
                    <Time iso={s.created_at} />, until <Time iso={s.expires_at} />
                  </span>
                  <ConfirmButton
                    label={s.current ? "Sign out" : "Revoke"}
                    title={s.current ? "Sign out this browser" : `Revoke the session of ${sessionName(s)}`}
                    question={
                      s.current
                        ? "Sign out of this browser?"
                        : `Revoke the session of ${sessionName(s)}? It is signed out at once.`
                    }
                    confirm={s.current ? "Sign out" : "Revoke session"}
                    action={async () => {
                      await del(`/api/me/sessions/${s.id}`);
                      if (s.current) location.assign("/login");
                      else sessions.reload();
                    }}
                  />
                </li>
              ))}
            </ul>
          )}
        </Resource>
      </section>
      <section aria-labelledby="grants-h">
        <h2 id="grants-h">CLI and MCP logins</h2>
        <Resource r={grants} what="CLI logins">
          {({ grants: list }) =>
            list.length === 0 ? (
              <Empty>
                <p>
                  No CLI or MCP logins. <code>relayctl login</code> signs the CLI in; it then shows here.
                </p>
              </Empty>
            ) : (
              <ul class="list" aria-label="CLI and MCP logins">
                {list.map((g) => (
                  <li key={g.id}>
                    <span>
                      {g.client_name ?? g.client_id}, since <Time iso={g.created_at} />, until{" "}
                      <Time iso={g.expires_at} />
                    </span>
                    <ConfirmButton
                      label="Revoke"
                      title={`Revoke ${g.client_name ?? g.client_id}`}
                      question={`Revoke the login of ${g.client_name ?? g.client_id}? It must sign in again.`}
                      confirm="Revoke login"
                      action={async () => {
                        await del(`/api/me/grants/${g.id}`);
                        grants.reload();
                      }}
                    />
                  </li>
                ))}
              </ul>
            )
          }
        </Resource>
      </section>
    </Page>
  );
}
