// Members (owners): the organization's people, invites (the link shown once; the
// pending ones listed, each revocable), a person's `exec` grant (commands and
// registry logins beside their role) and disabling a member.
import { useState } from "preact/hooks";
import { del, get, patch, post } from "../api";
import { useWho } from "../session";
import { Table } from "../table";
import {
  Badge,
  ConfirmButton,
  Form,
  type Loaded,
  Page,
  Resource,
  SecretOnce,
  Time,
  field,
  useLoad,
} from "../ui";
import "./people.css";

interface Member {
  id: string;
  email: string;
  role: string;
  can_exec: boolean;
  disabled: boolean;
  created_at: string;
}

interface Invite {
  id: string;
  email: string;
  role: string;
  expires_at: string;
  invite_url: string;
}

interface PendingInvite {
  id: string;
  email: string;
  role: string;
  invited_by: string;
  created_at: string;
  expires_at: string;
}

function PendingInvites({ invites }: { invites: Loaded<{ invites: PendingInvite[] }> }) {
  return (
    <div>
      <h2>Pending invites</h2>
      <Resource r={invites} what="pending invites">
        {({ invites: list }) =>
          list.length === 0 ? (
            <p class="hint">No invite is waiting to be used.</p>
          ) : (
            <Table
              label="Pending invites"
              rows={list}
              rowKey={(i) => i.id}
              columns={[
                { head: "E-mail", cell: (i) => i.email },
                { head: "Role", cell: (i) => i.role },
                { head: "Invited by", cell: (i) => i.invited_by },
                { head: "Expires", cell: (i) => <Time iso={i.expires_at} /> },
                {
                  head: "Actions",
                  hideHead: true,
                  cell: (i) => (
                    <ConfirmButton
                      label="Revoke"
                      title={`Revoke the invite of ${i.email}`}
                      question={`Revoke the invite of ${i.email}? Its link stops working.`}
                      confirm="Revoke invite"
                      action={async () => {
                        await del(`/api/users/invites/${i.id}`);
                        invites.reload();
                      }}
                    />
                  ),
                },
              ]}
            />
          )
        }
      </Resource>
    </div>
  );
}

export function MembersPage() {
  const who = useWho();
  const users = useLoad(() => get<{ users: Member[] }>("/api/users"), []);
  const owner = who.may("POST /api/users/invites");
  const invites = useLoad(
    () =>
      owner ? get<{ invites: PendingInvite[] }>("/api/users/invites") : Promise.resolve({ invites: [] }),
    [owner],
  );
  const [invite, setInvite] = useState<Invite>();
  if (!owner)
    return (
      <Page title="Members">
        <p>Only owners of the organization manage its members.</p>
      </Page>
    );
  return (
    <Page title="Members">
      <section class="card" aria-labelledby="invite-h">
        <h2 id="invite-h">Invite someone</h2>
        {invite ? (
          <>
            <p>
              Send this link to {invite.email}: it creates their account ({invite.role}) and works once.
            </p>
            <SecretOnce label="Invite link" value={invite.invite_url} note="Shown only this once." />
            <button type="button" onClick={() => setInvite(undefined)}>
              Done
            </button>
          </>
        ) : (
          <Form
            label="Invite someone"
            submit="Create invite link"
            onSubmit={async (f) => {
              setInvite(
                await post<Invite>("/api/users/invites", {
                  email: field(f, "email"),
                  role: field(f, "role"),
                }),
              );
              invites.reload();
            }}
          >
            <div class="grid">
              <label>
                E-mail
                <input name="email" type="email" required autoComplete="off" />
              </label>
              <label>
                Role
                <select name="role">
                  <option value="deployer">deployer (reads, deploys, restarts, reads logs)</option>
                  <option value="viewer">viewer (reads)</option>
                  <option value="owner">owner (manages everything)</option>
                </select>
              </label>
            </div>
          </Form>
        )}
      </section>
      <PendingInvites invites={invites} />
      <Resource r={users} what="members">
        {({ users: list }) => (
          <Table
            label="Members"
            rows={list}
            rowKey={(u) => u.id}
            columns={[
              { head: "E-mail", cell: (u) => u.email },
              { head: "Role", cell: (u) => (u.disabled ? <Badge status="disabled" /> : u.role) },
              {
                head: "Exec",
                cell: (u) =>
                  u.role === "owner" ? (
                    "as owner"
                  ) : u.disabled ? (
                    u.can_exec ? (
                      "granted"
                    ) : (
                      "no"
                    )
                  ) : (
                    <ConfirmButton
                      label={u.can_exec ? "Revoke exec" : "Grant exec"}
                      title={`${u.can_exec ? "Revoke" : "Grant"} exec for ${u.email}`}
                      question={
                        u.can_exec
                          ? `Stop ${u.email} running commands on servers and registry logins?`
                          : `Let ${u.email} run commands on servers and log them in to registries? A command can read what a server holds, such as applications' env values.`
                      }
                      confirm={u.can_exec ? "Revoke exec" : "Grant exec"}
                      danger={!u.can_exec}
                      action={async () => {
                        await patch(`/api/users/${u.id}`, { can_exec: !u.can_exec });
                        users.reload();
                      }}
                    />
                  ),
              },
              { head: "Since", cell: (u) => <Time iso={u.created_at} /> },
              {
                head: "Actions",
                hideHead: true,
                cell: (u) =>
                  !u.disabled &&
                  u.email !== who.email && (
                    <ConfirmButton
                      label="Disable"
                      title={`Disable ${u.email}`}
                      question={`Disable ${u.email}? Their sessions and CLI logins stop working at once.`}
                      confirm="Disable member"
                      action={async () => {
                        await del(`/api/users/${u.id}`);
                        users.reload();
                      }}
                    />
                  ),
              },
            ]}
          />
        )}
      </Resource>
    </Page>
  );
}
