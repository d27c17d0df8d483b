// Enrollment: trade a single-use join token for an agent credential
// (POST <control plane>/api/agent/enroll, process-interfaces.md) and save it.
import { hostname } from "node:os";
import { z } from "zod";
import { type AgentFile, writeAgentFile } from "./agent-file.js";

const enrolledSchema = z.object({
  server_id: z.string().min(1),
  server_name: z.string(),
  agent_credential: z.string().startsWith("rag_"),
  gateway_urls: z.array(z.string()).min(1),
});

export interface EnrollOptions {
  url: string;
  token: string;
  stateDir: string;
  agentVersion: string;
  /** Server labels (`--label k=v`), sent with the enrollment; the control plane validates them. */
  labels?: Record<string, string>;
}

/** `k=v` arguments as labels; a missing `=` is the user's mistake, said here. */
export function parseLabels(args: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const a of args) {
    const i = a.indexOf("=");
    if (i <= 0) throw new EnrollError(`--label '${a}' is not key=value`);
    out[a.slice(0, i)] = a.slice(i + 1);
  }
  return out;
}

/** An enrollment the control plane refused, or could not be reached for. The message is for the user. */
export class EnrollError extends Error {
  override name = "EnrollError";
}

export async function enroll(options: EnrollOptions): Promise<AgentFile> {
  const base = options.url.replace(/\/+$/, "");
  let response: Response;
  try {
    response = await fetch(`${base}/api/agent/enroll`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        join_token: options.token,
        hostname: hostname(),
        agent_version: options.agentVersion,
        ...(options.labels && Object.keys(options.labels).length > 0 ? { labels: options.labels } : {}),
      }),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (err) {
    const reason = (err as Error & { cause?: Error }).cause?.message ?? (err as Error).message;
    throw new EnrollError(`cannot reach ${base}: ${reason}`, { cause: err });
  }
  const body: unknown = await response.json().catch(() => undefined);
  if (response.status !== 201) {
    const detail = z.object({ detail: z.string() }).safeParse(body);
    throw new EnrollError(
      `enrollment refused (HTTP ${response.status}): ${detail.success ? detail.data.detail : response.statusText}`,
    );
  }
  const enrolled = enrolledSchema.safeParse(body);
  if (!enrolled.success) {
    const issue = enrolled.error.issues[0]!;
    throw new EnrollError(`unexpected enrollment answer: ${issue.path.join(".")}: ${issue.message}`);
  }
  const file: AgentFile = { control_plane_url: base, ...enrolled.data };
  await writeAgentFile(options.stateDir, file);
  return file;
}
