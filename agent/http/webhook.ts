import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../observe/metrics.js';
import { errorMessage } from '../platform/errors.js';
import { BodyTooLarge, readBody, sendJson } from './body.js';
import type { RefusalLog } from '../observe/refusal-log.js';
import { verifySignature } from './sign.js';
import type { GroupCommit } from '../store/group-commit.js';
import { StoreError } from '../store/outbox.js';
import { JsonError, parseVerbatim } from '../vendor/json.js';
import { parseTransaction } from '../vendor/parse.js';
import type { TransactionRecord } from '../vendor/vendor-api.js';

export const WEBHOOK_MAX_BYTES = 64 * 1024;

export interface WebhookDeps {
  secret: string;
  /** Where records are committed: concurrent requests share one commit. */
  commits: GroupCommit;
  /** vendor.location: a record of another site is answered 200 (so it is not resent) and not stored. */
  keep?: ((record: TransactionRecord) => boolean) | undefined;
  logger: Logger;
  metrics: Metrics;
  refusals: RefusalLog;
}

/**
 * The vendor's webhook. In this order: size (413, before hashing), signature over the raw bytes
 * (401), shape (400: not JSON, nested deeper than 32 levels, not a transaction record: what can
 * never be stored), commit (200 only after it, shared with the requests that arrived meanwhile; 503 while the record cannot be stored durably, so
 * the vendor retries). Values are stored as sent (numbers keep their digits). A replayed record
 * answers 200 and is stored once.
 */
export function webhookHandler(deps: WebhookDeps): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const answer = (res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void => {
    deps.metrics.webhookRequests.inc({ status: String(status) });
    sendJson(res, status, body, headers);
  };
  const refuse = (res: ServerResponse, status: number, message: string, why: string, detail: Record<string, unknown> = {}): void => {
    deps.refusals.note('webhook', String(status), message, detail);
    answer(res, status, { error: why });
  };
  return async (req, res) => {
    let raw: Buffer;
    try {
      raw = await readBody(req, WEBHOOK_MAX_BYTES);
    } catch (err) {
      if (err instanceof BodyTooLarge) {
        res.setHeader('connection', 'close');
        return refuse(res, 413, 'webhook body too large; refused', `body over ${WEBHOOK_MAX_BYTES} bytes`, { limit: WEBHOOK_MAX_BYTES });
      }
      deps.logger.debug({ err: errorMessage(err) }, 'webhook request aborted by the client');
      return;
    }
    if (!verifySignature(raw, req.headers['x-vendor-signature'], deps.secret)) {
      return refuse(res, 401, 'webhook signature missing or wrong; refused', 'bad or missing x-vendor-signature', {
        remote: req.socket.remoteAddress,
        hasHeader: req.headers['x-vendor-signature'] !== undefined,
      });
    }
    let body: unknown;
    try {
      body = parseVerbatim(raw.toString('utf8'));
    } catch (err) {
      const problem = err instanceof JsonError ? err.message : 'unreadable';
      return refuse(res, 400, 'signed webhook cannot be stored; refused', `not a transaction record: ${problem}`, { problem });
    }
    const parsed = parseTransaction(body);
    if (typeof parsed === 'string') {
      return refuse(res, 400, 'signed webhook is not a transaction record; refused', `not a transaction record: ${parsed}`, { problem: parsed });
    }
    if (deps.keep && !deps.keep(parsed)) {
      deps.logger.info({ transactionId: parsed.transactionId, location: String(parsed.fields['Location'] ?? '').slice(0, 64) }, 'webhook transaction of another location; not stored');
      return answer(res, 200, {});
    }
    try {
      const isNew = await deps.commits.add(parsed);
      // Answered first: the vendor waits on the commit, not on the journal.
      answer(res, 200, {});
      if (isNew) {
        deps.logger.info({ transactionId: parsed.transactionId, status: parsed.status, deviceId: parsed.deviceId }, 'transaction received by webhook');
      } else {
        deps.logger.debug({ transactionId: parsed.transactionId, status: parsed.status }, 'webhook repeated a known transaction');
      }
      return;
    } catch (err) {
      if (!(err instanceof StoreError)) throw err;
      deps.logger.error({ code: err.code, err: errorMessage(err), transactionId: parsed.transactionId }, 'cannot store a webhook transaction; answered 503 so the vendor retries');
      // A lock held by another process usually goes soon; a full or damaged disk does not.
      return answer(res, 503, { error: 'cannot store the record now; retry later' }, { 'retry-after': err.code === 'STORE_LOCKED' ? '5' : '30' });
    }
  };
}
