// GitHub App deliveries as the api receives and processes them, against a running control plane
// (api and gateway processes, MariaDB, NATS), a podman agent and Caddy, with GitHub's API stood in
// for (harness/github-app.ts): a bad signature is refused before anything is recorded, bodies up
// to GitHub's 25 MB cap are taken and larger ones refused, a delivery whose processing fails is
// retried and given up on, and one an api took and died with is processed by the next. The
// installation is bound and the application linked before the tests (the setup URL's own flow is
// github-app.test.ts's).
import { randomUUID } from "node:crypto";
import { request as httpRequest } from "node:http";
import { gzipSync } from "node:zlib";
import test from "ava";
import {
  INSTALLATION,
  REPO_ID,
  deliver,
  deliveryAudits,
  deliveryWhen,
  githubAppStack,
  processed,
  pushPayload,
  repo,
  s,
  sign,
} from "./harness/github-app";

githubAppStack(test, { installed: "linked" });

test.serial(
  "github - a missing, wrong-secret or tampered signature is 401 and records nothing",
  async (t) => {
    const body = JSON.stringify(pushPayload(repo.head().sha));
    const id = randomUUID();
    const wrong = await new (await import("@octokit/webhooks")).Webhooks({
      secret: "not-the-secret-at-all",
    }).sign(body);
    const good = await sign(body);
    const cases = {
      missing: await deliver("push", {}, { id, body, signature: null }),
      wrongSecret: await deliver("push", {}, { id, body, signature: wrong }),
      tampered: await deliver(
        "push",
        {},
        { id, body: body.replace('"refs/heads/main"', '"refs/heads/prod"'), signature: good },
      ),
      malformed: await deliver("push", {}, { id, body, signature: "sha256=zz" }),
    };
    for (const [name, res] of Object.entries(cases)) t.is(res.status, 401, name);
    // Signed, but not an event (every GitHub payload is a JSON object): 400, not a 500.
    for (const bad of ["null", "[1]", '"push"', "{not json"]) {
      const res = await deliver("push", {}, { id, body: bad });
      t.is(res.status, 400, `${bad}: ${JSON.stringify(res.json)}`);
      t.truthy(res.json.detail);
    }
    const rows = await s.c.db.query("SELECT id FROM github_deliveries WHERE id = ?", [id]);
    t.is(rows.length, 0);
  },
);

test.serial(
  "github - deliveries up to GitHub's 25 MB cap are accepted and unknown events ignored; a larger body is refused (413) and not recorded",
  async (t) => {
    const ping = {
      zen: "Keep it logically awesome.",
      hook_id: 1,
      installation: { id: INSTALLATION },
      pad: "",
    };
    const overhead = Buffer.byteLength(JSON.stringify(ping));
    ping.pad = "x".repeat(25 * 1024 * 1024 - overhead);
    const big = await deliver("ping", ping);
    t.is(big.status, 202);
    t.like(await processed(big.id), { event: "ping", outcome: { result: "ignored" } });
    ping.pad += "x";
    // The api answers 413 from the Content-Length alone, unread, and closes: a client still
    // writing megabytes may see EPIPE before the answer. So only the headers go, and the 413
    // must come before a single byte of the body (as test/security-github's bounded-body test).
    const overId = randomUUID();
    const body = JSON.stringify(ping);
    // Signed: an unsigned one is refused (401) before its size is even looked at.
    const signature = await sign(body);
    const req = httpRequest(`${s.c.baseUrl}/webhooks/github`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
        "x-github-event": "ping",
        "x-github-delivery": overId,
        "x-hub-signature-256": signature,
      },
    });
    const status = await new Promise<number | string>((resolve) => {
      req.on("response", (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", (err: NodeJS.ErrnoException) => resolve(String(err.code)));
      req.flushHeaders();
    });
    req.destroy();
    t.is(status, 413);
    t.is((await s.c.db.query("SELECT id FROM github_deliveries WHERE id = ?", [overId])).length, 0);
  },
);

test.serial(
  "github - a delivery whose processing fails is shown to its tenant with the error, retried, and audited when given up",
  async (t) => {
    // A stored delivery that cannot be processed (its record is not gzip):
    // one on its first attempt, one on its last.
    const insert = async (attempts: number) => {
      const id = randomUUID();
      await s.c.db.query(
        "INSERT INTO github_deliveries (id, event, action, installation_id, repository_id, payload_gz, status, attempts, received_at) VALUES (?, 'push', NULL, ?, ?, ?, 'pending', ?, ?)",
        [id, INSTALLATION, REPO_ID, Buffer.from("not gzip"), attempts, Date.now()],
      );
      return id;
    };
    const retried = await insert(0);
    const seen = await deliveryWhen(
      retried,
      'outcome LIKE \'%"result":"error"%\'',
      "the failing delivery shown to its tenant",
    );
    t.like(seen, { status: "processing" });
    t.regex(String(seen.outcome.detail), /processing failed \(attempt \d of 5, retried later\)/);
    await s.c.db.query("DELETE FROM github_deliveries WHERE id = ?", [retried]);

    const givenUp = await insert(4);
    const d = await processed(givenUp);
    t.like(d, { status: "failed", attempts: 5, outcome: { result: "error" } });
    t.regex(String(d.outcome.detail), /attempt 5 of 5, given up/);
    const audits = await deliveryAudits(givenUp);
    t.is(audits.length, 1, "given up once, audited once");
    t.like(audits[0], { payload: { event: "push", result: "error" } });
  },
);

test.serial("github - a delivery an api took and died with is processed by the next one", async (t) => {
  // What a crash between recording (or claiming) and finishing leaves: the row,
  // claimed by a process that is gone. Written here while no api runs.
  await s.c.api.stop("SIGKILL");
  const id = randomUUID();
  const body = JSON.stringify(pushPayload("c".repeat(40), { ref: "refs/heads/feature" }));
  await s.c.db.query(
    "INSERT INTO github_deliveries (id, event, action, installation_id, repository_id, payload_gz, status, attempts, claimed_until, received_at) VALUES (?, 'push', NULL, ?, ?, ?, 'processing', 1, ?, ?)",
    [id, INSTALLATION, REPO_ID, gzipSync(body), Date.now() - 1, Date.now()],
  );
  await s.c.api.start();
  s.c.baseUrl = s.c.api.apiUrl; // the api came back on another port
  const d = await processed(id);
  t.like(d, { status: "done", attempts: 2, outcome: { result: "nothing" } });
});
