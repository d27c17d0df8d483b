// The one definition of a UUID's shape in relayctl's TypeScript outside the control plane
// (which validates with zod's z.uuid()): application ids in routes and route file names
// here, server ids typed on the CLI. Its own module so the CLI imports it alone
// (`@relayctl/reverse-proxy-sync/uuid`), without the proxy adapters.

/** 8-4-4-4-12 lower-case hex, unanchored: for patterns that embed an id (route file names). */
export const UUID_SHAPE = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";

/** Exactly one UUID, lower case as relayctl writes ids (lower-case what a person typed first). */
export const UUID = new RegExp(`^${UUID_SHAPE}$`);
