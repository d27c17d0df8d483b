// What the Caddy writer compares and orders its routes with, apart so its tests
// can hold them against the slower forms they stand for.

export type Json = Record<string, unknown>;

export const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** JSON with object keys sorted: Caddy hands config back with its own key order. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (isObject(value)) {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/**
 * Whether canonical(a) === canonical(b), without making either text: a read of
 * 100 routes compares four per route (each route and its health route with
 * what this writer would write), which took ~2-3 ms as texts.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b)) return false;
    // [] and [undefined] have the same text: lists of other lengths are left to the texts.
    if (a.length !== b.length) return canonical(a) === canonical(b);
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i])) return false;
    return true;
  }
  if (isObject(a) || isObject(b)) {
    if (!isObject(a) || !isObject(b)) return false;
    const keys = Object.keys(a);
    if (keys.length !== Object.keys(b).length) return false;
    for (const k of keys) {
      if (!Object.prototype.propertyIsEnumerable.call(b, k) || !sameJson(a[k], b[k])) return false;
    }
    return true;
  }
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

/** What localeCompare without arguments compares with (ECMA-402), made once. */
const collator = new Intl.Collator();

/**
 * Ids of digits, lowercase ASCII letters and `-` only (ours: a prefix and a
 * UUID): the collator orders them as their code units do (`-` before digits
 * before letters, a prefix first), so `<` decides between two of them.
 */
const CODE_UNIT_ORDERED = /^[0-9a-z-]*$/;

export interface IdKey {
  id: string;
  /** The id is CODE_UNIT_ORDERED. */
  plain: boolean;
}

export const idKey = (id: string): IdKey => ({ id, plain: CODE_UNIT_ORDERED.test(id) });

/** a.id.localeCompare(b.id)'s sign, by code units where that is the same (two plain ids). */
export function compareIds(a: IdKey, b: IdKey): number {
  if (!a.plain || !b.plain) return collator.compare(a.id, b.id);
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
