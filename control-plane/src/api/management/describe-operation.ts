// A line saying what an operation did, for listings: an exec's command as
// given, else a short description from the fields its first audit event
// recorded (never a secret: those events hold none).
type Payload = Record<string, unknown>;

const str = (v: unknown) => (typeof v === "string" ? v : "");

const DESCRIBE: Record<string, (p: Payload) => string> = {
  exec: (p) => str(p.command),
  deploy: (p) => `deploy ${str(p.application_name)}${p.commit_ref ? ` @ ${str(p.commit_ref)}` : ""}`,
  restart: (p) => `restart ${str(p.container_name)}`,
  reboot: (p) => `reboot${p.via ? ` (via ${str(p.via)})` : ""}`,
  registry_login: (p) => `registry login ${str(p.registry_url)}`,
  registry_logout: (p) => `registry logout ${str(p.registry_url)}`,
  route_sync: (p) => {
    const routes = Array.isArray(p.routes) ? p.routes.length : 0;
    const removed = Array.isArray(p.remove_application_ids) ? p.remove_application_ids.length : 0;
    return `route sync: ${routes} route${routes === 1 ? "" : "s"}${removed ? `, ${removed} removed` : ""}`;
  },
};

export function describeOperation(type: string, payload: Payload): string {
  const line = DESCRIBE[type]?.(payload).trim();
  return line || type;
}
