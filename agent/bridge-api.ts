import type { LevelWithSilent } from 'pino';
import { backlogFigures, bridgeInfo, type StatusSources } from './agent-status.js';
import type { TransactionSync } from './components/transaction-sync.js';
import { transactionPayload } from './components/outbox-publisher.js';
import { setLogLevel, type Logger } from './logger.js';
import { RequestError, type RequestHandler } from './mqtt/bridge-requests.js';
import type { Topics } from './mqtt/topics.js';
import type { RecordRange } from './store/outbox.js';

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
export function bridgeApiHandlers(d: BridgeApiDeps): Record<string, RequestHandler> {
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
      const records = d.outbox.range(range, limit);
      // In windows of 20, each waiting for its PUBACKs: the broker's Receive Maximum is honoured.
      for (let i = 0; i < records.length; i += 20) {
        await Promise.all(
          records.slice(i, i + 20).map((rec) => d.broker.publish(d.topics.transaction(rec.deviceId), transactionPayload(rec, d.config.site.id, d.config.site.timezone), { qos: 1 })),
        );
      }
      d.logger.info({ records: records.length, ...range }, 'records published again on request');
      return {
        records: records.length,
        firstSeq: records[0]?.seq ?? null,
        lastSeq: records.at(-1)?.seq ?? null,
        more: records.length === limit,
      };
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
