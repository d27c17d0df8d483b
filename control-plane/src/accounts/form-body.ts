// `application/x-www-form-urlencoded` bodies, for the scopes that take them: the
// sign-in and device pages (browsers post forms) and the OAuth endpoints (RFC
// 6749 §3.2 and RFC 8628 §3.1 send form parameters). The rest of the api stays
// JSON only. A parameter given twice is kept as its first value; RFC 6749 §3.1
// says a repeated parameter is an error, and the OAuth routes check `repeated`.
import type { FastifyInstance } from "fastify";

export const REPEATED = Symbol("repeated form parameters");

export type FormBody = Record<string, string> & { [REPEATED]?: string[] };

export function acceptForms(app: FastifyInstance): void {
  app.addContentTypeParser(
    "application/x-www-form-urlencoded",
    { parseAs: "string", bodyLimit: 64 * 1024 },
    (_req, body, done) => {
      const out: FormBody = {};
      const repeated: string[] = [];
      for (const [k, v] of new URLSearchParams(body as string)) {
        if (k in out) repeated.push(k);
        else out[k] = v;
      }
      if (repeated.length) out[REPEATED] = repeated;
      done(null, out);
    },
  );
}
