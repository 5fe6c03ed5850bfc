/**
 * The vendor's JSON, values as sent. JSON.parse turns `150.10` into 150.1, `1e400` into Infinity
 * (then null) and 9007199254740993 into ...992, so numbers are kept as their source text
 * (JSON.rawJSON, Node 22+), and JSON.stringify writes that text back unchanged.
 *
 * Nesting is bounded before anything recursive runs: V8's JSON.parse copes with any depth, but a
 * reviver and JSON.stringify overflow the stack somewhere past a few thousand levels.
 */
import { AgentError } from '../platform/errors.js';

interface RawJson {
  readonly rawJSON: string;
}

declare global {
  // JSON source text access (TC39 stage 4; Node 22+), not yet in TypeScript's lib.
  interface JSON {
    rawJSON(text: string): RawJson;
    isRawJSON(value: unknown): boolean;
  }
}
type Reviver = (this: unknown, key: string, value: unknown, context: { source?: string }) => unknown;
const json = JSON as unknown as {
  rawJSON(text: string): RawJson;
  isRawJSON(value: unknown): value is RawJson;
  parse(text: string, reviver?: Reviver): unknown;
};

/** Deeper than any record a vendor sends (they are flat), shallow enough for every recursive tool. */
export const MAX_JSON_DEPTH = 32;

export type JsonErrorCode = 'JSON_INVALID' | 'JSON_TOO_DEEP';

export class JsonError extends AgentError {
  declare readonly code: JsonErrorCode;
  constructor(code: JsonErrorCode, message: string) {
    super(code, message);
    this.name = 'JsonError';
  }
}

const keepNumberText: Reviver = (_key, value, context) =>
  typeof value === 'number' && context.source !== undefined ? json.rawJSON(context.source) : value;

export function isRawNumber(value: unknown): value is RawJson {
  return json.isRawJSON(value);
}

/** A value as text: a string itself, a number as the vendor wrote it; null for anything else. */
export function scalarText(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (isRawNumber(value)) return value.rawJSON;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return null;
}

/** The deepest nesting of arrays and objects in a JSON text; stops counting past `limit`. */
export function jsonDepth(text: string, limit = Number.MAX_SAFE_INTEGER): number {
  let depth = 0;
  let max = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      i = endOfString(text, i) - 1;
    } else if (c === 0x7b || c === 0x5b) {
      depth += 1;
      if (depth > max) {
        max = depth;
        if (max > limit) return max;
      }
    } else if (c === 0x7d || c === 0x5d) {
      depth -= 1;
    }
  }
  return max;
}

/** Depth of an already parsed value, without recursion. */
export function valueDepth(value: unknown, limit = Number.MAX_SAFE_INTEGER): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, d] = stack.pop() as [unknown, number];
    if (v === null || typeof v !== 'object' || isRawNumber(v)) continue;
    if (d > max) {
      max = d;
      if (max > limit) return max;
    }
    for (const child of Object.values(v as Record<string, unknown>)) stack.push([child, d + 1]);
  }
  return max;
}

/** One JSON value, numbers kept as sent. Throws JsonError: not JSON, or nested too deep. */
export function parseVerbatim(text: string, maxDepth = MAX_JSON_DEPTH): unknown {
  const plain = parseIfCanonical(text, maxDepth);
  if (plain !== undefined) return plain;
  if (jsonDepth(text, maxDepth) > maxDepth) throw new JsonError('JSON_TOO_DEEP', `nested deeper than ${maxDepth} levels`);
  try {
    return json.parse(text, keepNumberText);
  } catch {
    throw new JsonError('JSON_INVALID', 'not JSON');
  }
}

/**
 * The fast way for what vendors mostly send, compact JSON: a plain JSON.parse (several times
 * faster than one with a reviver) is as good as the verbatim parse when writing the value back
 * gives the text exactly, since then every number was already in its shortest form. Anything else
 * (spaces, 150.10, 1e400, duplicate keys, too deep) is left to the verbatim parse.
 */
function parseIfCanonical(text: string, maxDepth: number): object | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
    if (typeof value !== 'object' || value === null || valueDepth(value, maxDepth) > maxDepth) return undefined;
    return JSON.stringify(value) === text ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Index just past the string that starts at `i` (a quote). */
function endOfString(t: string, i: number): number {
  for (let j = i + 1; j < t.length; j++) {
    const c = t.charCodeAt(j);
    if (c === 0x5c) j++;
    else if (c === 0x22) return j + 1;
  }
  return t.length;
}

const isSpace = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

function skipSpace(t: string, i: number): number {
  while (i < t.length && isSpace(t.charCodeAt(i))) i++;
  return i;
}

/** Index just past the value that starts at `i`; iterative, so any depth is fine. */
function endOfValue(t: string, i: number): number {
  const c = t.charCodeAt(i);
  if (c === 0x22) return endOfString(t, i);
  if (c !== 0x7b && c !== 0x5b) {
    let j = i;
    while (j < t.length && !isSpace(t.charCodeAt(j)) && !',]}'.includes(t.charAt(j))) j++;
    return j;
  }
  let depth = 0;
  for (let j = i; j < t.length; j++) {
    const d = t.charCodeAt(j);
    if (d === 0x22) j = endOfString(t, j) - 1;
    else if (d === 0x7b || d === 0x5b) depth++;
    else if (d === 0x7d || d === 0x5d) {
      depth--;
      if (depth === 0) return j + 1;
    }
  }
  return t.length;
}

/**
 * The source text of each element of the array under `member` of a top-level object, e.g. the
 * records of {"status":"success","data":[...]}: so one element nested too deep can be refused on
 * its own while the others are still read verbatim. Null when the text is not of that shape.
 */
export function memberElements(text: string, member: string): string[] | null {
  let i = skipSpace(text, 0);
  if (text.charCodeAt(i) !== 0x7b) return null;
  i = skipSpace(text, i + 1);
  while (i < text.length && text.charCodeAt(i) !== 0x7d) {
    if (text.charCodeAt(i) !== 0x22) return null;
    const keyEnd = endOfString(text, i);
    let key: unknown;
    try {
      key = JSON.parse(text.slice(i, keyEnd));
    } catch {
      return null;
    }
    i = skipSpace(text, keyEnd);
    if (text.charCodeAt(i) !== 0x3a) return null;
    i = skipSpace(text, i + 1);
    if (key === member && text.charCodeAt(i) === 0x5b) {
      const out: string[] = [];
      i = skipSpace(text, i + 1);
      while (i < text.length && text.charCodeAt(i) !== 0x5d) {
        const end = endOfValue(text, i);
        out.push(text.slice(i, end));
        i = skipSpace(text, end);
        if (text.charCodeAt(i) === 0x2c) i = skipSpace(text, i + 1);
        else if (text.charCodeAt(i) !== 0x5d) return null;
      }
      return out;
    }
    i = skipSpace(text, endOfValue(text, i));
    if (text.charCodeAt(i) === 0x2c) i = skipSpace(text, i + 1);
    else if (text.charCodeAt(i) !== 0x7d) return null;
  }
  return null;
}
