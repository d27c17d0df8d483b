// <state-dir>/agent.json: what enrollment hands the agent (its credential
// among it), so the file is 0600 in a 0700 directory and replaced atomically
// (writeFileAtomic also fsyncs the directory, so the rename survives a crash).
import { chmod, mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "@relayctl/reverse-proxy-sync";
import { z } from "zod";

const agentFileSchema = z.object({
  control_plane_url: z.string(),
  server_id: z.string().min(1),
  server_name: z.string(),
  agent_credential: z.string().startsWith("rag_"),
  gateway_urls: z.array(z.string()).min(1),
});

export type AgentFile = z.infer<typeof agentFileSchema>;

export function agentFilePath(stateDir: string): string {
  return join(stateDir, "agent.json");
}

export async function writeAgentFile(stateDir: string, contents: AgentFile): Promise<void> {
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  await chmod(stateDir, 0o700); // mkdir leaves an existing directory's mode alone
  await writeFileAtomic(agentFilePath(stateDir), `${JSON.stringify(contents, null, 2)}\n`, 0o600);
}

/** Reads and checks agent.json; the error says what to do when it is missing. */
export async function readAgentFile(stateDir: string): Promise<AgentFile> {
  const path = agentFilePath(stateDir);
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      throw new Error(
        `${path} not found: enroll first (relayctl-agent enroll --url <url> --token <rjt_...>)`,
        {
          cause: err,
        },
      );
    }
    throw err;
  }
  const parsed = agentFileSchema.safeParse(JSON.parse(text));
  if (!parsed.success)
    throw new Error(`${path} is not a valid agent file: ${parsed.error.issues[0]!.message}`);
  return parsed.data;
}
