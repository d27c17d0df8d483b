// The action's inputs (action.yml), read once and checked before any network
// call: a wrong key kind or a missing target list fails the step at once with
// one clear line.
import type { PortChoice } from "./compose.js";

export interface ActionInputs {
  apiKey: string;
  /** Control plane base URL, without a trailing slash. */
  url: string;
  composeFile?: string;
  /** `name:port` entries, the alternative to composeFile. */
  services?: string[];
  composePort: PortChoice;
  /** Image reference for services that name none (the `services` input, build-only services). */
  imageTag?: string;
  force: boolean;
  workflowRunId?: string;
  commitSha?: string;
  timeoutMs: number;
}

export class InputError extends Error {
  override name = "InputError";
}

/** Reads one input; "" when it is not set (as @actions/core's getInput). */
export type InputGetter = (name: string) => string;

const TRUE = ["true", "True", "TRUE"];
const FALSE = ["false", "False", "FALSE"];

function booleanInput(get: InputGetter, name: string, fallback: boolean): boolean {
  const value = get(name);
  if (value === "") return fallback;
  if (TRUE.includes(value)) return true;
  if (FALSE.includes(value)) return false;
  throw new InputError(`input '${name}' must be true or false, got '${value}'`);
}

function apiKeyInput(get: InputGetter): string {
  const key = get("api_key");
  if (key === "") throw new InputError("input 'api_key' is required: an rca_ Automation key");
  if (key.startsWith("rk_t_")) {
    throw new InputError(
      "input 'api_key' is a retired Tenant Integration Key (rk_t_); use an rca_ Automation key",
    );
  }
  if (!key.startsWith("rca_")) {
    throw new InputError(
      "input 'api_key' must be an rca_ Automation key (create one under API Keys → Automation Keys with the external_deploy scope)",
    );
  }
  return key;
}

function urlInput(get: InputGetter): string {
  const url = get("url");
  if (url === "") throw new InputError("input 'url' is required: the relayctl control plane's base URL");
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new InputError(`input 'url' is not a URL: '${url}'`);
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") {
    throw new InputError(`input 'url' must be an http(s) URL, got '${parsed.protocol}'`);
  }
  return url.replace(/\/+$/, "");
}

function timeoutInput(get: InputGetter): number {
  const text = get("timeout_seconds");
  if (text === "") return 120_000;
  const seconds = Number(text);
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > 3600) {
    throw new InputError(`input 'timeout_seconds' must be a whole number from 1 to 3600, got '${text}'`);
  }
  return seconds * 1000;
}

export function readInputs(get: InputGetter, env: Record<string, string | undefined>): ActionInputs {
  const apiKey = apiKeyInput(get);
  const url = urlInput(get);
  const composeFile = get("compose_file") || undefined;
  const servicesText = get("services");
  if (composeFile && servicesText) {
    throw new InputError("inputs 'compose_file' and 'services' exclude each other; give one");
  }
  if (!composeFile && !servicesText) {
    throw new InputError("give input 'compose_file' (a compose file) or 'services' (name:port entries)");
  }
  const composePort = get("compose_port") || "published";
  if (composePort !== "published" && composePort !== "target") {
    throw new InputError(`input 'compose_port' must be 'published' or 'target', got '${composePort}'`);
  }
  return {
    apiKey,
    url,
    composeFile,
    services: servicesText ? servicesText.split("\n") : undefined,
    composePort,
    imageTag: get("image_tag") || undefined,
    force: booleanInput(get, "force", false),
    workflowRunId: get("workflow_run_id") || env.GITHUB_RUN_ID || undefined,
    commitSha: get("commit_sha") || env.GITHUB_SHA || undefined,
    timeoutMs: timeoutInput(get),
  };
}
