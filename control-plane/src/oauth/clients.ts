// The OAuth clients relayctl's authorization server knows. All are public
// clients (RFC 6749 §2.1: they cannot keep a secret, so they authenticate with
// their client_id alone) that use the device flow.
export interface OAuthClient {
  id: string;
  /** Shown on the /device approval page: who is asking. */
  name: string;
}

export const CLIENTS: Record<string, OAuthClient> = {
  "relayctl-cli": { id: "relayctl-cli", name: "relayctl command-line client" },
};

export function findClient(id: unknown): OAuthClient | undefined {
  return typeof id === "string" && Object.hasOwn(CLIENTS, id) ? CLIENTS[id] : undefined;
}
