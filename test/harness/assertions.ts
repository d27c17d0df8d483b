// Shapes from the contract (docs: service-interface.md, Operation resource), shared by tests.
import type { ExecutionContext } from "ava";
import type { ApiResponse } from "./http";

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** ISO 8601 in UTC: a Z suffix (or +00:00). */
export const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|\+00:00)$/;

export function describe(res: ApiResponse): string {
  return `HTTP ${res.status} ${res.text.slice(0, 500)}`;
}

/** A 200 answer of POST /exec for a command that finished in time. */
export function assertCompleted(
  t: ExecutionContext,
  res: ApiResponse,
  expected: { exit_code: number; stdout: string; stderr?: string },
): void {
  t.is(res.status, 200, describe(res));
  t.regex(String(res.json.operation_id), UUID, describe(res));
  t.is(res.json.status, "completed", describe(res));
  t.is(res.json.exit_code, expected.exit_code, describe(res));
  t.is(res.json.stdout, expected.stdout, describe(res));
  if (expected.stderr !== undefined) t.is(res.json.stderr, expected.stderr, describe(res));
  t.true(Number.isInteger(res.json.duration_ms) && Number(res.json.duration_ms) >= 0, describe(res));
}

/** The error body of the Automation API: exactly {"detail": string}. */
export function assertDetailOnly(t: ExecutionContext, res: ApiResponse, status: number): string {
  t.is(res.status, status, describe(res));
  t.deepEqual(Object.keys(res.json), ["detail"], describe(res));
  t.is(typeof res.json.detail, "string", describe(res));
  t.true(String(res.json.detail).length > 0, describe(res));
  return String(res.json.detail ?? "");
}

/** An error answer with exactly this status and body {"detail": detail} (a RegExp when the detail quotes input). */
export function assertError(
  t: ExecutionContext,
  res: ApiResponse,
  status: number,
  detail: string | RegExp,
): void {
  const got = assertDetailOnly(t, res, status);
  if (typeof detail === "string") t.is(got, detail, describe(res));
  else t.regex(got, detail, describe(res));
}
