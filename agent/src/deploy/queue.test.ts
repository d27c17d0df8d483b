import test from "ava";
import { SerialQueues } from "./queue.js";

/** A task that records its start and ends when told. */
function gate() {
  let open = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, opened };
}

test("deploy queue - one application's tasks run one at a time in the order queued", async (t) => {
  const q = new SerialQueues();
  const events: string[] = [];
  const gates = [gate(), gate(), gate()];
  const runs = gates.map((g, i) =>
    q.run("app-a", async () => {
      events.push(`start ${i}`);
      await g.opened;
      events.push(`end ${i}`);
      return i;
    }),
  );
  await Promise.resolve();
  t.deepEqual(events, ["start 0"]);
  // Opening them in reverse must not change the order.
  gates[2]!.open();
  gates[1]!.open();
  gates[0]!.open();
  t.deepEqual(await Promise.all(runs), [0, 1, 2]);
  t.deepEqual(events, ["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"]);
});

test("deploy queue - a failed task does not stop the next; other applications do not wait", async (t) => {
  const q = new SerialQueues();
  const blocker = gate();
  const first = q.run("app-a", async () => {
    await blocker.opened;
    throw new Error("boom");
  });
  const second = q.run("app-a", async () => "after");
  const other = await q.run("app-b", async () => "b ran while a was busy");
  t.is(other, "b ran while a was busy");
  blocker.open();
  await t.throwsAsync(first, { message: "boom" });
  t.is(await second, "after");
  await q.idle();
});
