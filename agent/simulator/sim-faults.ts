export type SimEndpoint = 'lists' | 'status' | 'transactions' | 'control';
export const SIM_ENDPOINTS: readonly SimEndpoint[] = ['lists', 'status', 'transactions', 'control'];

export type FaultMode =
  | 'error' // an HTTP error status (default 500) with an error envelope
  | 'timeout' // no answer at all; the connection is held until the client gives up
  | 'slow' // the normal answer, after delayMs
  | 'malformed' // 200 with a body that is not JSON
  | 'bad-envelope' // 200 with {"status":"error"}
  | 'reset' // the connection is destroyed without an answer
  | 'rate-limit'; // 429 with Retry-After

export const FAULT_MODES: readonly FaultMode[] = ['error', 'timeout', 'slow', 'malformed', 'bad-envelope', 'reset', 'rate-limit'];

export interface Fault {
  mode: FaultMode;
  /** Endpoints it applies to; all when absent. */
  endpoints?: SimEndpoint[];
  /** How many requests it affects; until cleared when absent. */
  count?: number;
  /** Matching requests let through untouched before it starts. */
  after?: number;
  /** HTTP status for 'error'. */
  status?: number;
  /** Delay for 'slow', hold time for 'timeout'. */
  delayMs?: number;
  retryAfterSeconds?: number;
  /** For control: start the chair anyway, then fail the answer (the ambiguous case). */
  commit?: boolean;
}

export function parseFault(input: unknown): Fault | string {
  if (!input || typeof input !== 'object' || Array.isArray(input)) return 'a fault is a JSON object';
  const f = input as Record<string, unknown>;
  if (!FAULT_MODES.includes(f['mode'] as FaultMode)) return `mode must be one of ${FAULT_MODES.join(', ')}`;
  const endpoints = f['endpoints'];
  if (endpoints !== undefined && (!Array.isArray(endpoints) || !endpoints.every((e) => SIM_ENDPOINTS.includes(e as SimEndpoint)))) {
    return `endpoints must be a list of ${SIM_ENDPOINTS.join(', ')}`;
  }
  const num = (k: string): number | undefined => (typeof f[k] === 'number' ? (f[k] as number) : undefined);
  return {
    mode: f['mode'] as FaultMode,
    endpoints: endpoints as SimEndpoint[] | undefined,
    count: num('count'),
    after: num('after'),
    status: num('status'),
    delayMs: num('delayMs'),
    retryAfterSeconds: num('retryAfterSeconds'),
    commit: f['commit'] === true,
  };
}

/** Faults waiting to hit requests, first match wins. */
export class FaultBook {
  private faults: Fault[] = [];

  add(fault: Fault): void {
    this.faults.push({ ...fault });
  }

  clear(): void {
    this.faults = [];
  }

  list(): readonly Fault[] {
    return this.faults;
  }

  /** The fault for this request, consuming one of its count. */
  take(endpoint: SimEndpoint): Fault | null {
    const i = this.faults.findIndex((f) => !f.endpoints || f.endpoints.includes(endpoint));
    if (i < 0) return null;
    const fault = this.faults[i] as Fault;
    if (fault.after !== undefined && fault.after > 0) {
      fault.after -= 1;
      return null;
    }
    if (fault.count !== undefined) {
      fault.count -= 1;
      if (fault.count <= 0) this.faults.splice(i, 1);
    }
    return fault;
  }
}
