// login (device flow), logout (revokes the login's tokens) and whoami.
import type { Command } from "commander";
import { CLIENT_ID, baseUrlOf, fetchOrFail } from "../client.js";
import { loadCredentials, removeCredentials } from "../credentials.js";
import { ctxOf } from "../context.js";
import { CLI_SCOPES, deviceLogin } from "../device-login.js";
import { emit, printFields } from "../output.js";

export function registerAuth(program: Command): void {
  program
    .command("login")
    .description("sign in with your browser (OAuth device flow); saves the login in your config dir (0600)")
    .option("--no-browser", "do not try to open a browser; just print the address and code")
    .option(
      "--scope <scopes>",
      "OAuth scopes to ask for, space-separated: read, deploy, exec, admin (your role still limits them)",
      CLI_SCOPES,
    )
    .addHelpText(
      "after",
      '\nExamples:\n  relayctl login --url https://relayctl.example.com\n  relayctl login --no-browser\n  relayctl login --scope "read deploy"   # a login that cannot run commands or change settings',
    )
    .action(async (o: { browser: boolean; scope: string }, cmd: Command) => {
      const g = cmd.optsWithGlobals() as { url?: string; json?: boolean };
      const url = baseUrlOf(g, loadCredentials());
      await deviceLogin(url, { browser: o.browser, scope: o.scope });
      const { api, json } = ctxOf(cmd);
      const me = await api.call("GET", "/api/me", "dashboard");
      emit(json, me, () => {
        const user = me.user as { email: string; role: string };
        process.stdout.write(
          `Logged in to ${url} as ${user.email} (${user.role}, tenant ${me.tenant_name}).\n`,
        );
      });
    });

  program
    .command("logout")
    .description("revoke this login's tokens on the server and forget them here")
    .addHelpText("after", "\nExample:\n  relayctl logout")
    .action(async (_o: unknown, cmd: Command) => {
      const s = loadCredentials();
      const json = Boolean((cmd.optsWithGlobals() as { json?: boolean }).json);
      if (s) {
        // RFC 7009: revoking the refresh token ends its access tokens too.
        await fetchOrFail(`${s.url}/oauth/revoke`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({
            token: s.refresh_token,
            token_type_hint: "refresh_token",
            client_id: CLIENT_ID,
          }),
        });
        removeCredentials();
      }
      emit(json, { logged_out: Boolean(s) }, () =>
        process.stdout.write(s ? `Logged out of ${s.url}.\n` : "Not logged in.\n"),
      );
    });

  program
    .command("whoami")
    .description("show who the current credential acts as")
    .addHelpText("after", "\nExample:\n  relayctl whoami\n  RELAYCTL_TOKEN=rck_... relayctl whoami --json")
    .action(async (_o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const me = await api.call("GET", "/api/me", "dashboard");
      emit(json, me, () => {
        if (me.type === "user") {
          const u = me.user as { email: string; role: string; id: string };
          printFields({
            user: u.email,
            role: u.role,
            user_id: u.id,
            tenant: me.tenant_name,
            tenant_id: me.tenant_id,
            url: api.baseUrl,
          });
        } else {
          const k = me.key as { id: string; name: string };
          printFields({
            api_key: k.name,
            key_id: k.id,
            tenant: me.tenant_name,
            tenant_id: me.tenant_id,
            url: api.baseUrl,
          });
        }
      });
    });
}
