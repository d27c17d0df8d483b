// The installation the relayctl CLI tests (cli-relayctl*.test.ts) log in to: a cluster whose
// access tokens live 3 s (a test can outlive one) and whose device flow polls every second, its
// tenant's owner signed in in a browser that approves or denies each `relayctl login`. The tests
// were one file; they are split by command group to run side by side, each file with one stack.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type CliResult, type CliUser, collect, waitForStderr } from "./cli";
import { type Cluster, startCluster } from "./cluster";
import { Browser, type Person, createOwner } from "./people";

/** Access tokens live 3 s here, so a test can outlive one. */
export const ACCESS_TTL_S = 3;

export interface CliStack {
  c: Cluster;
  owner: Person;
  /** The owner, signed in. */
  browser: Browser;
  /** `relayctl login` with the approval done in the browser when the code appears. */
  login(u: CliUser): Promise<CliResult>;
}

export async function startCliStack(): Promise<CliStack> {
  const c = await startCluster({
    serverEnv: {
      RELAYCTL_OAUTH_DEVICE_INTERVAL_SECONDS: "1",
      RELAYCTL_OAUTH_ACCESS_TOKEN_TTL_SECONDS: String(ACCESS_TTL_S),
    },
  });
  const owner = await createOwner(c.db.url, c.tenantId);
  const browser = new Browser(c.baseUrl);
  await browser.signIn(owner);
  const login = async (u: CliUser) => {
    const child = u.spawn(["login", "--url", c.baseUrl]);
    const done = collect(child);
    const [, uri] = await waitForStderr(child, /\(or open (\S+)\)/);
    await browser.answerDevice(uri, "approve");
    return done;
  };
  return { c, owner, browser, login };
}

/** A login as the CLI saved it (credentials.json in the user's config dir). */
export interface Stored {
  url: string;
  access_token: string;
  refresh_token: string;
  expires_at: number;
}

export const stored = (u: CliUser): Stored =>
  JSON.parse(readFileSync(join(u.configDir, "credentials.json"), "utf8"));
