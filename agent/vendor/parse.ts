import { VendorError } from './errors.js';
import { JsonError, MAX_JSON_DEPTH, memberElements, parseVerbatim, scalarText, valueDepth } from './json.js';
import type { ChairList, ChairReading, TransactionPage, TransactionRecord } from './vendor-api.js';

/** Text fields of a chair (name, location, status...) are cut to this many characters. */
export const MAX_TEXT_FIELD = 256;

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

function badEnvelope(what: string): VendorError {
  return new VendorError('VENDOR_BAD_ENVELOPE', `vendor answered with an unexpected body: ${what}`);
}

/**
 * Unwraps {"status":"success","code":200,"data":...}. An envelope whose status is not success is
 * an error; one that says 401/403 inside is treated as the bad-key answer it is.
 */
export function unwrapEnvelope(body: unknown): unknown {
  if (!isObject(body)) throw badEnvelope('not a JSON object');
  const status = body['status'];
  if (typeof status !== 'string' || status.toLowerCase() !== 'success') {
    const code = body['code'];
    if (code === 401 || code === 403) {
      throw new VendorError('VENDOR_UNAUTHORIZED', 'vendor rejected the Apikey', { status: code });
    }
    throw badEnvelope(`status is ${JSON.stringify(status ?? null)}, not "success"`);
  }
  if (!('data' in body)) throw badEnvelope('no data');
  return body['data'];
}

/** A body that is not JSON. */
export function parseJsonText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw badEnvelope('not JSON');
  }
}

/** LeftMin/LeftSec: null, a number, or numeric text; anything else reads as null. */
export function readNumberish(v: unknown): number | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'number') return Number.isFinite(v) ? v : null;
  if (typeof v === 'string') {
    const t = v.trim();
    if (t === '' || !/^-?\d+(\.\d+)?$/.test(t)) return null;
    return Number(t);
  }
  return null;
}

/** Text of a value as the vendor wrote it (a number keeps its digits); null when it is not a scalar. */
function readText(v: unknown): string | null {
  return scalarText(v);
}

/** A display field, bounded: a hostile vendor cannot make every chair state a megabyte. */
function readShortText(v: unknown): string | null {
  const t = scalarText(v);
  return t === null || t.length <= MAX_TEXT_FIELD ? t : `${t.slice(0, MAX_TEXT_FIELD - 1)}…`;
}

function readBool(v: unknown): boolean {
  if (typeof v === 'boolean') return v;
  if (typeof v === 'number') return v !== 0;
  if (typeof v === 'string') return ['true', '1', 'yes'].includes(v.trim().toLowerCase());
  return false;
}

/** The live-state fields, from either the nested data object (list) or the flat status body. */
function readState(deviceId: string, meta: Json, state: Json): ChairReading {
  const status = readShortText(state['Status']);
  if (status === null) throw badEnvelope(`chair ${deviceId} has no Status`);
  return {
    deviceId,
    deviceCode: readShortText(meta['DeviceCode']),
    deviceName: readShortText(meta['DeviceName']),
    location: readShortText(meta['Location']),
    status,
    seated: readBool(state['Seated']),
    leftMin: readNumberish(state['LeftMin']),
    leftSec: readNumberish(state['LeftSec']),
    serverTime: readShortText(state['ServerTime']),
    firmwareVersion: readShortText(state['FirmwareVersion']),
  };
}

/**
 * The chair list. An element that is not a chair is left out and reported rather than failing
 * the whole list: one broken entry must not make every other chair look unavailable.
 */
export function parseChairList(data: unknown): ChairList {
  if (!Array.isArray(data)) throw badEnvelope('chair list data is not an array');
  const list: ChairList = { chairs: [], rejected: [] };
  const seen = new Set<string>();
  data.forEach((entry, i) => {
    if (!isObject(entry)) {
      list.rejected.push(`element ${i} is not an object`);
      return;
    }
    const id = readText(entry['DeviceId']);
    const state = entry['data'];
    if (!id) list.rejected.push(`element ${i} has no DeviceId`);
    else if (!isObject(state)) list.rejected.push(`chair ${id} has no data object`);
    else if (readText(state['Status']) === null) list.rejected.push(`chair ${id} has no Status`);
    else if (!seen.has(id)) {
      seen.add(id);
      list.chairs.push(readState(id, entry, state));
    }
  });
  return list;
}

export function parseChairStatus(data: unknown, requested: string): ChairReading {
  if (!isObject(data)) throw badEnvelope('chair status data is not an object');
  const id = readText(data['DeviceId']) ?? requested;
  return readState(id, data, data);
}

/** A transaction record, or the reason it is not one. Every field is kept verbatim. */
export function parseTransaction(value: unknown): TransactionRecord | string {
  if (!isObject(value)) return 'not a JSON object';
  const transactionId = readText(value['TransactionId']);
  if (!transactionId) return 'TransactionId is missing or not text';
  const status = readText(value['Status']);
  if (!status) return 'Status is missing or not text';
  const deviceId = readText(value['DeviceId']);
  if (!deviceId) return 'DeviceId is missing or not text';
  return {
    fields: value,
    transactionId,
    status,
    deviceId,
    transactionTime: readText(value['TransactionTime']),
  };
}

export function parseTransactionPage(data: unknown): TransactionPage {
  if (!Array.isArray(data)) throw badEnvelope('transaction list data is not an array');
  const page: TransactionPage = { records: [], rejected: [], size: data.length };
  data.forEach((element, index) => {
    const parsed = valueDepth(element, MAX_JSON_DEPTH) > MAX_JSON_DEPTH ? `nested deeper than ${MAX_JSON_DEPTH} levels` : parseTransaction(element);
    if (typeof parsed === 'string') page.rejected.push({ index, problem: parsed });
    else page.records.push(parsed);
  });
  return page;
}

/**
 * The transaction list's body, every record's values verbatim. A record nested too deep for the
 * tools that handle records is refused on its own; the rest of the page is read.
 */
export function parseTransactionListBody(text: string): TransactionPage {
  try {
    return parseTransactionPage(unwrapEnvelope(parseVerbatim(text, MAX_JSON_DEPTH + 2)));
  } catch (err) {
    if (!(err instanceof JsonError)) throw err;
    if (err.code === 'JSON_INVALID') throw badEnvelope('not JSON');
  }
  // Some element is nested too deep: read the envelope plainly, then each element on its own.
  const data = unwrapEnvelope(parseJsonText(text));
  const elements = memberElements(text, 'data');
  if (!Array.isArray(data) || elements === null || elements.length !== data.length) throw badEnvelope('transaction list data is not an array');
  const page: TransactionPage = { records: [], rejected: [], size: elements.length };
  elements.forEach((element, index) => {
    let parsed: TransactionRecord | string;
    try {
      parsed = parseTransaction(parseVerbatim(element));
    } catch (e) {
      parsed = e instanceof JsonError ? e.message : 'unreadable';
    }
    if (typeof parsed === 'string') page.rejected.push({ index, problem: parsed });
    else page.records.push(parsed);
  });
  return page;
}
