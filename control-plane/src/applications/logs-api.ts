// GET /api/applications/{id}/logs?tail=&since=&follow= — the live container's
// stdout and stderr, read by the engine on the application's server
// (logs-reader.ts). A read of the application: the management credentials, and
// an automation key whose server scope holds the application's server (403
// otherwise); no operation, no audit. Every value of the application's stored
// env is scrubbed on the agent (`***`), as in command output.
// Without follow: 200 JSON {container, lines: [{stream, text}], truncated, end, detail}.
// With follow=true|1: server-sent events, `event: log` per line ({stream, text}),
// then `event: end` ({reason, detail}) when the container's log ends, the agent
// goes away or the follow reaches RELAYCTL_LOGS_FOLLOW_MAX_SECONDS; follows are
// bounded per credential and per tenant (logs-limits.ts, 429).
import type { FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import type { ApiContext } from "../http/context.js";
import { type Credential, MANAGEMENT, type RouteSpec, route } from "../http/route.js";
import { queryInt } from "../http/validation.js";
import { RcError } from "../errors.js";
import { findServer } from "../servers/servers.js";
import { openEnv } from "./env.js";
import { liveContainer } from "./live-route.js";
import { type EndReason, type LogLineOut, type LogsTarget, startLogsRead } from "./logs-reader.js";
import { FollowLimits } from "./logs-limits.js";
import { getApplication } from "./store.js";

/** The contract's bound on `tail`. */
const MAX_TAIL = 10_000;
/** The JSON answer keeps at most this much text (the newest lines); `truncated` says so. */
const MAX_ANSWER_CHARS = 4 * 1024 * 1024;
/** A comment line now and then keeps proxies from closing a quiet stream. */
const KEEPALIVE_MS = 15_000;

const query = z.strictObject({
  tail: queryInt(1, MAX_TAIL).optional(),
  since: z
    .string()
    .regex(/^[0-9][0-9A-Za-z:.+-]{0,63}$/, {
      error: "must be an RFC 3339 time (2024-05-01T12:00:00Z) or a duration such as 10m or 1h30m",
    })
    .optional(),
  follow: z.enum(["true", "false", "1", "0"]).optional(),
});

const line = z.object({ stream: z.enum(["stdout", "stderr"]), text: z.string() });
const logsAnswer = z.object({
  container: z.string(),
  lines: z.array(line),
  /** Older lines were left out to keep the answer under 4 MiB. */
  truncated: z.boolean(),
  end: z.enum(["complete", "container_gone", "max_time", "cancelled", "failed", "agent_disconnected"]),
  detail: z.string(),
});

/** The management API's credentials, and automation keys (checked against their server scope). */
const READERS: readonly Credential[] = ["automation_key", ...MANAGEMENT];

const frame = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

export const logsRoutes = (ctx: ApiContext, closing: AbortSignal): RouteSpec[] => {
  const limits = new FollowLimits(ctx.config.logs);
  return [
    route({
      method: "GET",
      url: "/api/applications/:id/logs",
      access: { credentials: READERS, role: "deployer" },
      tag: "management",
      summary: "The live container's output (JSON, or server-sent events with follow=true)",
      schema: { params: z.object({ id: z.string() }), querystring: query },
      responses: { 200: logsAnswer },
      handler: async (req, reply) => {
        const target = await targetOf(ctx, req, req.params.id, req.query);
        if (!target.follow) return reply.send(await readAll(ctx, target));
        let release: () => void;
        try {
          release = limits.acquire(req.principal.keyId, req.principal.tenantId);
        } catch (err) {
          reply.header("retry-after", "5");
          throw err;
        }
        try {
          await follow(ctx, reply, target, closing);
        } finally {
          release();
        }
      },
    }),
  ];
};

type Target = LogsTarget & { container: string };

/** The application (404), its server in the key's scope (403), its live container (409), its env. */
async function targetOf(
  ctx: ApiContext,
  req: FastifyRequest,
  id: string,
  q: z.output<typeof query>,
): Promise<Target> {
  const p = req.principal;
  const app = await getApplication(ctx.db, p.tenantId, id);
  await findServer(ctx.db, p, app.server_id);
  const live = await liveContainer(ctx.db, app);
  if (!live)
    throw new RcError(
      "RC_ERR_APPLICATION_NOT_LIVE",
      `application '${app.name}' has no live container: deploy it first`,
    );
  const follow = q.follow === "true" || q.follow === "1";
  return {
    container: live.container_name,
    serverId: app.server_id,
    containerName: live.container_name,
    tail: q.tail ?? 200,
    since: q.since,
    follow,
    maxSeconds: ctx.config.logs.followMaxSeconds,
    secrets: await secretsOf(ctx, app.id),
    requestId: String(req.id),
  };
}

/** The stored env's values, to scrub; refused rather than read unscrubbed when they cannot be opened. */
async function secretsOf(ctx: ApiContext, applicationId: string): Promise<string[]> {
  if (!ctx.config.masterKey) {
    const stored = await ctx.db("application_env").where({ application_id: applicationId }).first("name");
    if (stored)
      throw new RcError(
        "RC_ERR_MASTER_KEY_UNSET",
        "the application's env values cannot be opened to scrub its logs: the control plane has no RELAYCTL_MASTER_KEY",
      );
    return [];
  }
  return Object.values(await openEnv(ctx.db, ctx.config.masterKey, applicationId));
}

async function readAll(ctx: ApiContext, target: Target): Promise<z.output<typeof logsAnswer>> {
  const lines: LogLineOut[] = [];
  let chars = 0;
  let truncated = false;
  const ended = await new Promise<{ reason: EndReason; detail: string }>((resolve, reject) => {
    startLogsRead(ctx.bus, target, {
      lines: (batch) => {
        for (const l of batch) {
          lines.push(l);
          chars += l.text.length;
        }
        while (chars > MAX_ANSWER_CHARS && lines.length > 1) {
          chars -= lines.shift()!.text.length;
          truncated = true;
        }
      },
      end: (reason, detail) => resolve({ reason, detail }),
    }).catch(reject);
  });
  return { container: target.container, lines, truncated, end: ended.reason, detail: ended.detail };
}

/** Server-sent events until the read ends, the client leaves or the api closes. */
async function follow(ctx: ApiContext, reply: FastifyReply, target: Target, closing: AbortSignal) {
  // Until the stream starts, events wait here: a refusal (409 not connected, 503
  // bus down) is still a JSON answer.
  const pending: string[] = [];
  const out = { write: (s: string) => void pending.push(s) };
  let done: () => void = () => {};
  const over = new Promise<void>((resolve) => {
    done = resolve;
  });
  const read = await startLogsRead(ctx.bus, target, {
    lines: (batch) => {
      for (const l of batch) out.write(frame("log", l));
    },
    end: (reason, detail) => {
      out.write(frame("end", { reason, detail }));
      done();
    },
  });
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache, no-transform",
    connection: "keep-alive",
    "x-accel-buffering": "no",
  });
  raw.write(`: following ${target.container}\n\n`);
  let quietSince = Date.now();
  out.write = (s) => {
    raw.write(s);
    quietSince = Date.now();
  };
  for (const s of pending.splice(0)) raw.write(s);
  const keepalive = setInterval(() => {
    if (Date.now() - quietSince >= KEEPALIVE_MS) out.write(": keep-alive\n\n");
  }, KEEPALIVE_MS / 3);
  // The agent ends the follow at maxSeconds; this is the backstop should its end be lost.
  const backstop = setTimeout(
    () => {
      read.stop();
      out.write(frame("end", { reason: "max_time", detail: "the follow reached its maximum time" }));
      done();
    },
    (target.maxSeconds + 30) * 1000,
  );
  const leave = () => {
    read.stop();
    done();
  };
  const shutdown = () => {
    read.stop();
    out.write(frame("end", { reason: "cancelled", detail: "the control plane is shutting down" }));
    done();
  };
  raw.on("close", leave);
  closing.addEventListener("abort", shutdown, { once: true });
  if (closing.aborted) shutdown();
  try {
    await over;
  } finally {
    clearInterval(keepalive);
    clearTimeout(backstop);
    raw.off("close", leave);
    closing.removeEventListener("abort", shutdown);
    raw.end();
  }
}
