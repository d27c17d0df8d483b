// How the CLI fails: one line on stderr (the server's `detail`, or OAuth's
// `error_description`) and an exit code per kind, from sysexits(3), so a script
// can tell a typo from a refused token from a server that is down. A remote
// command's own exit code (exec) is passed through as is.
export const EXIT = {
  ok: 0,
  /** The remote operation failed (deploy failed, exec could not run). */
  failed: 1,
  /** The request was refused as invalid (4xx other than 401/403: 404, 409, 422...). */
  refused: 65,
  /** The server failed or could not be reached (5xx, network). */
  server: 69,
  /** Bad command line (unknown command or option, missing argument). */
  usage: 64,
  /** Not logged in, token expired beyond refresh, revoked, or not allowed (401, 403). */
  auth: 77,
  /** exec: the command was still running when --timeout passed (as coreutils timeout). */
  timeout: 124,
} as const;

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

export const usageError = (message: string) => new CliError(message, EXIT.usage);
export const authError = (message: string) => new CliError(message, EXIT.auth);

/** The exit code of an HTTP error status. */
export function exitForStatus(status: number): number {
  if (status === 401 || status === 403) return EXIT.auth;
  if (status >= 500) return EXIT.server;
  return EXIT.refused;
}
