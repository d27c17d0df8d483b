// The operation types, once: the union every layer uses, and what each type is
// known by — the key scope that allows it, how its call answers, whether the
// agent times it, and the line a listing shows for it. The dashboard's API
// client imports this file too (web/src/api.ts), so it imports nothing.

/** The operation scopes an automation key can be limited to (contract: "operations"). */
export const OPERATION_SCOPES = [
  "exec",
  "deploy",
  "restart",
  "reboot",
  "registry_login",
  "registry_logout",
  "external_deploy",
] as const;
export type OperationScope = (typeof OPERATION_SCOPES)[number];

type Payload = Record<string, unknown>;

export interface OperationTypeInfo {
  /** The key scope that allows it. */
  scope: OperationScope;
  /**
   * How the call that starts it answers: `result` waits for the outcome up to
   * the call's timeout (then 202 running), `accepted` is always 202 running.
   */
  answers: "result" | "accepted";
  /**
   * Whether the agent times it (a lease it heartbeats, and its own timeout before
   * the hard deadline). A reboot is not: the machine goes away, and the
   * operation ends when the agent says Hello with a new boot id.
   */
  agentTimed: boolean;
  /** A line for listings from its first audit event's fields (which hold no secret). */
  describe: (p: Payload) => string;
}

const str = (v: unknown) => (typeof v === "string" ? v : "");
const count = (v: unknown) => (Array.isArray(v) ? v.length : 0);

export const OPERATION_TYPES = {
  exec: { scope: "exec", answers: "result", agentTimed: true, describe: (p) => str(p.command) },
  deploy: {
    scope: "deploy",
    answers: "accepted",
    agentTimed: true,
    describe: (p) => `deploy ${str(p.application_name)}${p.commit_ref ? ` @ ${str(p.commit_ref)}` : ""}`,
  },
  restart: {
    scope: "restart",
    answers: "result",
    agentTimed: true,
    describe: (p) => `restart ${str(p.container_name)}`,
  },
  reboot: {
    scope: "reboot",
    answers: "accepted",
    agentTimed: false,
    describe: (p) => `reboot${p.via ? ` (via ${str(p.via)})` : ""}`,
  },
  registry_login: {
    scope: "registry_login",
    answers: "accepted",
    agentTimed: true,
    describe: (p) => `registry login ${str(p.registry_url)}`,
  },
  registry_logout: {
    scope: "registry_logout",
    answers: "result",
    agentTimed: true,
    describe: (p) => `registry logout ${str(p.registry_url)}`,
  },
  route_sync: {
    scope: "external_deploy",
    answers: "result",
    agentTimed: true,
    describe: (p) => {
      const routes = count(p.routes);
      const removed = count(p.remove_application_ids);
      return `route sync: ${routes} route${routes === 1 ? "" : "s"}${removed ? `, ${removed} removed` : ""}`;
    },
  },
  // A deleted application's containers and images removed from its server (issue 29).
  app_cleanup: {
    scope: "deploy",
    answers: "result",
    agentTimed: true,
    describe: (p) => `clean up ${str(p.application_name)}`,
  },
} as const satisfies Record<string, OperationTypeInfo>;

export type OperationType = keyof typeof OPERATION_TYPES;

export function isOperationType(v: string): v is OperationType {
  return Object.hasOwn(OPERATION_TYPES, v);
}

/** The operation types a key's scope allows (an empty scope allows every type). */
export function typesInScope(scopes: readonly string[]): OperationType[] {
  const all = Object.keys(OPERATION_TYPES) as OperationType[];
  if (scopes.length === 0) return all;
  return all.filter((t) => scopes.includes(OPERATION_TYPES[t].scope));
}

/** Types the agent does not time: the sweeper ends them right at their deadline. */
export const UNTIMED_TYPES = (Object.keys(OPERATION_TYPES) as OperationType[]).filter(
  (t) => !OPERATION_TYPES[t].agentTimed,
);

/** A line saying what an operation did, for listings (the type's name when there is nothing to say). */
export function describeOperation(type: string, payload: Payload): string {
  const line = isOperationType(type) ? OPERATION_TYPES[type].describe(payload).trim() : "";
  return line || type;
}
