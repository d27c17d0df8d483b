// The CloudProvider port: ask a cloud provider's API to reboot one server.
// Adapters are named by provider (hetzner.ts, digitalocean.ts) and follow each
// provider's public API documentation; base URLs come from config so tests can
// point them at local fakes.
export const PROVIDERS = ["hetzner", "digitalocean"] as const;
export type ProviderName = (typeof PROVIDERS)[number];

export interface CloudProvider {
  /** Resolves once the provider accepted the reboot; throws ProviderError otherwise. */
  reboot(providerServerId: string, token: string): Promise<{ actionId: string }>;
}

/** The provider refused or could not be reached; the message is safe to show. */
export class ProviderError extends Error {
  override name = "ProviderError";
}

const TIMEOUT_MS = 30_000;

/**
 * POSTs to a provider and returns the JSON body of a 2xx answer. Errors carry the
 * provider's own message (both providers answer errors as JSON), never the token.
 */
export async function postJson(
  provider: string,
  url: string,
  token: string,
  body: unknown,
  errorMessage: (json: unknown) => string | undefined,
): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(url, {
      method: "POST",
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        accept: "application/json",
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (err) {
    throw new ProviderError(`${provider} API unreachable: ${(err as Error).message}`, { cause: err });
  }
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    const message = errorMessage(json) ?? text.slice(0, 500);
    throw new ProviderError(`${provider} API answered ${res.status}: ${message}`);
  }
  return json;
}
