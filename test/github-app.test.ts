// The GitHub App's setup URL against a running control plane (api and gateway processes,
// MariaDB, NATS), a podman agent and Caddy, with GitHub's API stood in for (harness/github-app.ts):
// an installation is bound to the tenant whose signed-in person asked for the install link, only
// for a GitHub user who can access it, with a single-use, unforgeable state, and the dashboard's
// GitHub page says how it went. Deliveries: github-app-webhooks; pushes: github-app-push;
// deploy_tags, watch_paths and repository and installation events: github-app-repository.
import { randomUUID } from "node:crypto";
import test from "ava";
import { describe } from "./harness/assertions";
import { axeViolations, launchBrowser } from "./harness/browser";
import { type Dash, signInDash } from "./harness/dashboard-session";
import {
  FULL_NAME,
  INSTALLATION,
  type Json,
  REPO_ID,
  deliver,
  deliveryAudits,
  example,
  gh,
  githubAppStack,
  processed,
  s,
} from "./harness/github-app";
import { createOwner } from "./harness/people";
import { pollUntil } from "./harness/wait";

githubAppStack(test);

test.serial(
  "github - the setup URL binds an installation to the tenant that asked, for a GitHub user who can access it; a state is single-use and unforgeable",
  async (t) => {
    gh.installations.set(INSTALLATION, {
      id: INSTALLATION,
      account: { login: "octo-org", type: "Organization" },
      created_at: new Date(Date.now() + 1000).toISOString(),
      repositories: [REPO_ID],
    });
    gh.users.set("octo-admin", [INSTALLATION]);
    gh.users.set("bystander", []);
    // The installation arrives by webhook first and waits unbound.
    const created = example("installation", (e) => e.action === "created");
    created.installation = {
      ...created.installation,
      id: INSTALLATION,
      account: { ...created.installation.account, login: "octo-org" },
    };
    created.repositories = [{ id: REPO_ID, name: "app", full_name: FULL_NAME, private: true }];
    // Who installed: the setup URL binds only for them.
    created.sender = { ...created.sender, login: "octo-admin", id: gh.userId("octo-admin") };
    const d = await deliver("installation", created);
    t.is(d.status, 202);
    await pollUntil(
      async () =>
        (await s.c.db.query("SELECT status FROM github_deliveries WHERE id = ? AND status = 'done'", [d.id]))
          .length === 1 || undefined,
      { what: "installation delivery processed", timeoutMs: 30_000 },
    );
    const mineNow = async () => (await s.manage("/github/installations")).json.installations as Json[];
    t.deepEqual(await mineNow(), [], "unbound: nobody's yet");

    // Install links are made and finished by a signed-in person (issue 30, finding 1).
    const owner = await signInDash(s.c.baseUrl, await createOwner(s.c.db.url, s.tenantId));
    const newState = async () => {
      const link = await owner.call("POST", "/api/github/install-link");
      t.is(link.status, 200, describe(link));
      t.true(
        String(link.json.url).startsWith(`${gh.url}/github-apps/relayctl-test/installations/new?state=`),
        String(link.json.url),
      );
      return String(link.json.state);
    };
    const setup = (
      st: string,
      code?: string,
      installationId = INSTALLATION,
      who: Dash = owner,
      headers: Record<string, string> = {},
    ) =>
      fetch(
        `${s.c.baseUrl}/github/setup?installation_id=${installationId}&state=${encodeURIComponent(st)}${code === undefined ? "" : `&code=${code}`}&setup_action=install`,
        { headers: { cookie: `relayctl_session=${who.sessionToken}`, ...headers }, redirect: "manual" },
      );
    // What a browser sends on GitHub's redirect (a top-level navigation).
    const navigation = { accept: "text/html,application/xhtml+xml", "sec-fetch-mode": "navigate" };
    const refusedWith = async (res: Response, status: number, what: string) => {
      const body = (await res.json()) as Json;
      t.is(res.status, status, `${what}: ${JSON.stringify(body)}`);
      return body;
    };

    const state = await newState();
    const [nonce, exp] = state.split(".");
    await refusedWith(
      await setup(`${nonce}.${exp}.${"A".repeat(43)}`, gh.issueCode("octo-admin")),
      400,
      "forged signature",
    );
    // The user authorization is required: without a code, with a code GitHub
    // never issued, or with one of a user who cannot access the installation.
    t.regex(
      (await refusedWith(await setup(await newState()), 403, "no code")).detail,
      /no authorization code/,
    );
    await refusedWith(await setup(await newState(), "0123456789abcdef0123"), 403, "unknown code");
    await refusedWith(await setup(await newState(), gh.issueCode("bystander")), 403, "user without access");
    t.deepEqual(await mineNow(), [], "nothing bound by a refused attempt");

    const code = gh.issueCode("octo-admin");
    // A refusal, in the browser GitHub sent back: the dashboard's GitHub page says why.
    const inBrowser = await setup(
      await newState(),
      gh.issueCode("bystander"),
      INSTALLATION,
      owner,
      navigation,
    );
    t.is(inBrowser.status, 303);
    const refusedAt = new URL(inBrowser.headers.get("location") ?? "", s.c.baseUrl);
    t.is(refusedAt.pathname, "/app/github");
    t.regex(refusedAt.searchParams.get("error") ?? "", /\S/);
    t.deepEqual(await mineNow(), [], "nothing bound by a refusal in the browser either");

    // Installed, in a real browser: GitHub's redirect lands on the dashboard's GitHub page,
    // which says so and lists the installation (not raw JSON).
    const b = await launchBrowser(s.c.baseUrl);
    await b.context.addCookies([{ name: "relayctl_session", value: owner.sessionToken, url: s.c.baseUrl }]);
    await b.page.goto(
      `/github/setup?installation_id=${INSTALLATION}&state=${encodeURIComponent(state)}&code=${code}&setup_action=install`,
    );
    const landed = new URL(b.page.url());
    t.is(`${landed.pathname}${landed.search}`, `/app/github?installed=${INSTALLATION}&account=octo-org`);
    const said = b.page.getByTestId("github-installed");
    await said.waitFor();
    t.regex(await said.innerText(), /The GitHub App is installed on octo-org/);
    await b.page.getByText("octo-org/app").waitFor();
    t.deepEqual(await axeViolations(b.page), [], "the page has no serious accessibility fault");
    t.deepEqual(b.consoleErrors, []);
    await b.browser.close();
    await refusedWith(await setup(state, gh.issueCode("octo-admin")), 400, "the state was spent");
    await refusedWith(await setup(await newState(), code), 403, "the code was spent");

    // Another tenant with a good state of its own cannot take the installation,
    // nor bind one that existed before its link was issued (a guessed id).
    const other = await s.c.admin(["create-tenant", "--name", `other-${randomUUID().slice(0, 6)}`]);
    const otherKey = await s.c.admin([
      "create-api-key",
      "--tenant",
      String(other.tenant_id),
      "--name",
      "other",
    ]);
    const otherOwner = await signInDash(s.c.baseUrl, await createOwner(s.c.db.url, String(other.tenant_id)));
    const otherLink = async () => {
      const res = await otherOwner.call("POST", "/api/github/install-link");
      return String(res.json.state);
    };
    await refusedWith(
      await setup(await otherLink(), gh.issueCode("octo-admin"), INSTALLATION, otherOwner),
      409,
      "bound to the first tenant already",
    );
    // Defence in depth: even a user GitHub lists for it (say an org member with
    // read access to one repository) cannot bind an installation older than the link.
    gh.installations.set(INSTALLATION + 1, {
      id: INSTALLATION + 1,
      account: { login: "victim-org", type: "Organization" },
      created_at: new Date(Date.now() - 3600_000).toISOString(),
      repositories: [],
    });
    gh.users.set("victim-member", [INSTALLATION + 1]);
    const guessed = await refusedWith(
      await setup(await otherLink(), gh.issueCode("victim-member"), INSTALLATION + 1, otherOwner),
      400,
      "an installation older than the link",
    );
    t.regex(guessed.detail, /existed before this install link was issued/);
    // The old race: someone else's brand-new installation, claimed with the
    // attacker's own valid state and the attacker's own code, before its owner comes back.
    gh.installations.set(INSTALLATION + 2, {
      id: INSTALLATION + 2,
      account: { login: "new-victim-org", type: "Organization" },
      created_at: new Date().toISOString(),
      repositories: [],
    });
    gh.users.set("new-victim-admin", [INSTALLATION + 2]);
    gh.users.set("mallory", []);
    await refusedWith(
      await setup(await otherLink(), gh.issueCode("mallory"), INSTALLATION + 2, otherOwner),
      403,
      "a brand-new installation the attacker cannot access",
    );
    const raced = await s.c.db.query<{ tenant_id: string | null }>(
      "SELECT tenant_id FROM github_installations WHERE id = ?",
      [INSTALLATION + 2],
    );
    t.true(
      raced.every((r) => r.tenant_id === null),
      JSON.stringify(raced),
    );
    const theirs = await fetch(`${s.c.baseUrl}/api/github/installations`, {
      headers: { "x-api-key": String(otherKey.key) },
    });
    t.deepEqual(((await theirs.json()) as Json).installations, []);

    const insts = await mineNow();
    t.deepEqual(
      insts.map((i) => i.installation_id),
      [INSTALLATION],
    );
    t.deepEqual(insts[0]?.repositories, [{ repository_id: REPO_ID, full_name: FULL_NAME, private: true }]);
    // The delivery received before the binding is now the tenant's, with what it did.
    t.like(await processed(d.id), {
      event: "installation",
      action: "created",
      outcome: { result: "recorded" },
    });
    t.like(await deliveryAudits(d.id), [
      {
        payload: {
          event: "installation",
          action: "created",
          installation_id: INSTALLATION,
          result: "recorded",
        },
      },
    ]);
    // The users' tokens were used for the one question and went nowhere else.
    t.true(gh.userTokens.length >= 4);
    const dump = await s.c.db.dumpText();
    const logs = s.c.logText();
    for (const u of gh.userTokens) {
      t.false(dump.includes(u), "a user token is stored in no table");
      t.false(logs.includes(u), "nor in any log");
    }
    t.true(gh.refused.length === 0, `stand-in refused: ${gh.refused.join(", ")}`);
  },
);
