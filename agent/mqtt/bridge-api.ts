import type { LevelWithSilent } from 'pino';
import { backlogFigures, bridgeInfo, shortBridgeInfo, type StatusSources } from '../observe/agent-status.js';
import { summaryWithoutChairs } from '../summary/today.js';
import type { TransactionSync } from '../vendor/transaction-sync.js';
import { transactionPayload } from '../delivery/transaction-payload.js';
import { setLogLevel, type Logger } from '../platform/logger.js';
import { RequestError, type RequestHandler } from './bridge-requests.js';
import type { Topics } from './topics.js';
import type { RecordRange } from '../store/outbox.js';

/** The most records one `resend` request publishes again; ask again from the next seq for more. */
export const MAX_RESEND = 10_000;
const LEVELS: readonly LevelWithSilent[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export interface BridgeApiDeps extends StatusSources {
  sync: TransactionSync;
  topics: Topics;
  rootLogger: Logger;
  logger: Logger;
}

const integer = (v: unknown, name: string): number | undefined => {
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw new RequestError('invalid_parameter', `${name} must be a whole number >= 0`);
  return v;
};

const instant = (v: unknown, name: string): number | undefined => {
  if (v === undefined) return undefined;
  const t = typeof v === 'string' && v.length <= 64 ? Date.parse(v) : Number.NaN;
  if (Number.isNaN(t)) throw new RequestError('invalid_parameter', `${name} must be an ISO 8601 time with an offset, e.g. 2026-11-22T14:00:00+07:00`);
  return t;
};

/** Only the parameters a request knows: a typo is an error, not a silently wider request. */
function only(params: Record<string, unknown>, allowed: readonly string[]): void {
  const unknown = Object.keys(params).filter((k) => !allowed.includes(k));
  if (unknown.length > 0) throw new RequestError('invalid_parameter', `unknown parameter ${unknown[0]?.slice(0, 64)}; known: ${allowed.join(', ') || 'none'}`);
}

/** The requests of the bridge request API (README, Bridge requests), by name. */
/** Resends that may wait behind the one under way. */
const MAX_RESENDS_WAITING = 4;
/** Records read from the database at once during a resend. */
const RESEND_PAGE = 500;

/** The requests whose data has a smaller form, for a broker that does not take the whole answer. */
export const BRIDGE_API_SHORT_ANSWERS: Readonly<Record<string, (data: unknown) => unknown>> = {
  summary: (data) => summaryWithoutChairs(data as { chairs: Record<string, unknown> }),
  info: (data) => shortBridgeInfo(data as Record<string, unknown>),
};

export function bridgeApiHandlers(d: BridgeApiDeps): Record<string, RequestHandler> {
  /** The last resend in line, and how many are in line (the one under way included). */
  const resends = { last: Promise.resolve() as Promise<unknown>, queued: 0 };

  /** Publishes a range again, page by page, 20 in flight at a time: memory stays one page. */
  const resendRange = async (range: RecordRange, limit: number): Promise<Record<string, unknown>> => {
    let sent = 0;
    let firstSeq: number | null = null;
    let lastSeq: number | null = null;
    let next = range;
    while (sent < limit) {
      const page = d.outbox.range(next, Math.min(RESEND_PAGE, limit - sent));
      if (page.length === 0) break;
      // In windows of 20, each waiting for its PUBACKs: the broker's Receive Maximum is honoured.
      for (let i = 0; i < page.length; i += 20) {
        if (!d.broker.connected) throw new RequestError('broker_disconnected', `the broker went away after ${sent + i} record(s); ask again from fromSeq ${page[i]?.seq ?? ''}`);
        await Promise.all(
          page.slice(i, i + 20).map((rec) => d.broker.publish(d.topics.transaction(rec.deviceId), transactionPayload(rec, d.site.siteId, d.site.timeZone), { qos: 1 })),
        );
      }
      sent += page.length;
      firstSeq ??= page[0]?.seq ?? null;
      lastSeq = page.at(-1)?.seq ?? lastSeq;
      if (page.length < RESEND_PAGE) break;
      next = { ...range, fromSeq: (lastSeq ?? 0) + 1 };
    }
    d.logger.info({ records: sent, ...range }, 'records published again on request');
    return { records: sent, firstSeq, lastSeq, more: sent === limit };
  };

  return {
    health_check: (p) => {
      only(p, []);
      const snap = d.health.snapshot();
      return { healthy: d.health.ok, ...snap };
    },
    info: (p) => {
      only(p, []);
      return bridgeInfo(d);
    },
    chairs: (p) => {
      only(p, []);
      return d.registry.views().map((v) => ({ deviceId: v.deviceId, online: v.online, state: v.state }));
    },
    summary: (p) => {
      only(p, []);
      return d.today();
    },
    outbox: (p) => {
      only(p, []);
      return { ...backlogFigures(d), inFlight: d.inFlight() };
    },
    sync: async (p) => {
      only(p, []);
      return { ...(await d.sync.run()) };
    },
    resend: async (p) => {
      only(p, ['fromSeq', 'toSeq', 'from', 'to', 'limit']);
      const range: RecordRange = {
        fromSeq: integer(p['fromSeq'], 'fromSeq'),
        toSeq: integer(p['toSeq'], 'toSeq'),
        from: instant(p['from'], 'from'),
        to: instant(p['to'], 'to'),
      };
      if (range.fromSeq === undefined && range.from === undefined) throw new RequestError('invalid_parameter', 'give fromSeq or from (and optionally toSeq, to, limit)');
      const limit = integer(p['limit'], 'limit') ?? MAX_RESEND;
      if (limit < 1 || limit > MAX_RESEND) throw new RequestError('invalid_parameter', `limit must be 1 to ${MAX_RESEND}`);
      if (!d.broker.connected) throw new RequestError('broker_disconnected', 'not connected to the broker');
      // One resend at a time for the whole agent, a few more waiting, the rest refused: twenty at
      // once were twenty times 10,000 records in memory (469 MiB against MemoryMax=300M).
      if (resends.queued > MAX_RESENDS_WAITING) throw new RequestError('busy', `a resend is under way and ${MAX_RESENDS_WAITING} are waiting; ask again when one has answered`);
      resends.queued += 1;
      const turn = resends.last.then(() => resendRange(range, limit));
      resends.last = turn.then(
        () => undefined,
        () => undefined,
      );
      try {
        return await turn;
      } finally {
        resends.queued -= 1;
      }
    },
    log_level: (p) => {
      only(p, ['level']);
      const level = p['level'];
      if (typeof level !== 'string' || !(LEVELS as readonly string[]).includes(level)) throw new RequestError('invalid_parameter', `level must be one of ${LEVELS.join(', ')}`);
      const was = d.rootLogger.level;
      setLogLevel(d.rootLogger, level as LevelWithSilent);
      d.rootLogger.warn({ level, was }, 'log level changed by a bridge request (until the next restart)');
      return { level, was };
    },
  };
}
