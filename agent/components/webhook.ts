import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import { errorMessage } from '../errors.js';
import { BodyTooLarge, parseJsonBody, readBody, sendJson } from '../http/body.js';
import { verifySignature } from '../http/sign.js';
import { StoreError, type Outbox } from '../store/outbox.js';
import { parseTransaction } from '../vendor/parse.js';

export const WEBHOOK_MAX_BYTES = 64 * 1024;

export interface WebhookDeps {
  secret: string;
  outbox: Outbox;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
}

/**
 * The vendor's webhook. In this order: size (413, before hashing), signature over the raw bytes
 * (401), shape (400), commit (200 only after it; 503 when the record cannot be stored so the
 * vendor retries). A replayed record answers 200 and is stored once.
 */
export function webhookHandler(deps: WebhookDeps): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const answer = (res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void => {
    deps.metrics.webhookRequests.inc({ status: String(status) });
    sendJson(res, status, body, headers);
  };
  return async (req, res) => {
    let raw: Buffer;
    try {
      raw = await readBody(req, WEBHOOK_MAX_BYTES);
    } catch (err) {
      if (err instanceof BodyTooLarge) {
        deps.logger.warn({ limit: WEBHOOK_MAX_BYTES }, 'webhook body too large; refused');
        res.setHeader('connection', 'close');
        return answer(res, 413, { error: `body over ${WEBHOOK_MAX_BYTES} bytes` });
      }
      deps.logger.debug({ err: errorMessage(err) }, 'webhook request aborted by the client');
      return;
    }
    if (!verifySignature(raw, req.headers['x-vendor-signature'], deps.secret)) {
      deps.logger.warn({ remote: req.socket.remoteAddress, hasHeader: req.headers['x-vendor-signature'] !== undefined }, 'webhook signature missing or wrong; refused');
      return answer(res, 401, { error: 'bad or missing x-vendor-signature' });
    }
    const parsed = parseTransaction(parseJsonBody(raw));
    if (typeof parsed === 'string') {
      deps.logger.warn({ problem: parsed }, 'signed webhook is not a transaction record; refused');
      return answer(res, 400, { error: `not a transaction record: ${parsed}` });
    }
    try {
      const inserted = deps.outbox.insert([parsed], 'webhook', deps.clock.now());
      if (inserted > 0) {
        deps.logger.info({ transactionId: parsed.transactionId, status: parsed.status, deviceId: parsed.deviceId }, 'transaction received by webhook');
      } else {
        deps.logger.debug({ transactionId: parsed.transactionId, status: parsed.status }, 'webhook repeated a known transaction');
      }
      return answer(res, 200, {});
    } catch (err) {
      deps.logger.error(
        { code: err instanceof StoreError ? err.code : undefined, err: errorMessage(err), transactionId: parsed.transactionId },
        'cannot store a webhook transaction; answered 503 so the vendor retries',
      );
      return answer(res, 503, { error: 'cannot store the record now; retry later' }, { 'retry-after': '30' });
    }
  };
}
