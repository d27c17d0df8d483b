import test from "ava";
import { rolloutState } from "../github/statuses.js";
import { forgeState } from "./statuses.js";

const rollout = (status: string, exit_code: number | null) => ({
  status,
  exit_code,
  stderr: null,
  dispatched_at: 1,
  reported_state: "pending",
  rollout_id: "r",
});

test("commit status - a rollout's, from its operation, in each forge's words", (t) => {
  const words = (kind: "gitlab" | "gitea") =>
    [
      rollout("running", null),
      rollout("completed", 0),
      rollout("completed", 1),
      rollout("failed", -1),
      rollout("timeout", null),
    ].map((o) => forgeState(kind, o).state);
  // GitLab hears `running` once the first server's deployment is on its agent, after `pending`.
  t.deepEqual(words("gitlab"), ["running", "success", "failed", "failed", "failed"]);
  t.is(forgeState("gitlab", { ...rollout("running", null), reported_state: null }).state, "pending");
  t.is(forgeState("gitlab", { ...rollout("running", null), dispatched_at: null }).state, "pending");
  t.deepEqual(words("gitea"), ["pending", "success", "failure", "failure", "failure"]);
  t.deepEqual(
    [rollout("running", null), rollout("completed", 0), rollout("completed", 1), rollout("failed", -1)].map(
      (o) => rolloutState(o).state,
    ),
    ["pending", "success", "failure", "failure"],
  );
  t.is(
    forgeState("gitea", rollout("completed", 1)).description,
    "rolled out, but not on every server; the link shows which",
  );
  // A deployment's (no rollout) keeps GitLab's running once an agent has it.
  t.is(forgeState("gitlab", { ...rollout("running", null), rollout_id: null }).state, "running");
});
