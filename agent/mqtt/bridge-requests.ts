import type { Component } from '../platform/component.js';
import { errorMessage } from '../platform/errors.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../observe/metrics.js';
import { RefusalLog } from '../observe/refusal-log.js';
import type { Clock } from '../platform/clock.js';
import { BrokerError, type Broker, type InboundMessage } from './broker.js';
import { PACKET_TOO_LARGE } from './packet-size.js';
import { HeldSubscription } from './held-subscription.js';
import { FLOOD_FIX, type RequestBudget } from './request-budget.js';
import { publishAnswer, responseTopicProblem } from './start-commands.js';
import type { Topics } from './topics.js';

/** A request is a small JSON object; anything over this is refused before it is parsed. */
export const MAX_REQUEST_BYTES = 4096;

/** A request's problem, answered as `error`; the message is safe to show the caller. */
export class RequestError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

/** One request: its parameters (the payload object without `transaction`) in, `data` out. */
export type RequestHandler = (params: Record<string, unknown>) => unknown;

export interface BridgeRequestsDeps {
  broker: Broker;
  topics: Topics;
  logger: Logger;
  metrics?: Metrics;
  clock: Clock;
  /** Shared with the start commands: how many requests are carried out, answered, or dropped. */
  budget: RequestBudget;
  handlers: Readonly<Record<string, RequestHandler>>;
  /**
   * A smaller form of a request's data (summary without its chairs), answered where the broker
   * does not take the whole answer (Mosquitto's message_size_limit).
   */
  shortAnswers?: Readonly<Record<string, (data: unknown) => unknown>>;
}

/**
 * The bridge request API: B/bridge/request/<name> answered on B/bridge/response/<name> with
 * {"status":"ok"|"error","data":...,"error":"...","transaction":...}, and also on the MQTT 5
 * response topic with the correlation data when given (refused when invalid or inside B/, as for
 * starts). Every request gets an answer, none can stop the agent: unknown names, payloads over
 * 4 KiB, bad JSON, bad parameters and handler failures are all answered as errors. A retained
 * request is refused and cleared, so a reconnect never replays it. Who may call is the broker's
 * ACL to decide (README, Bridge requests). A client that asks in a loop is held to the request
 * budget (request-budget.ts): each name a few a second, then `rate_limited`, then not answered.
 */
export class BridgeRequests implements Component {
  readonly name = 'bridge-requests';
  private readonly refusals: RefusalLog;
  private readonly subscription: HeldSubscription;

  constructor(private readonly deps: BridgeRequestsDeps) {
    this.refusals = new RefusalLog({ clock: deps.clock, logger: deps.logger, metrics: deps.metrics });
    // Retain As Published: a retained message is recognised as such when delivered live too.
    this.subscription = new HeldSubscription(deps.broker, deps.topics.requestFilter, { retainAsPublished: true }, deps.logger, 'bridge requests');
  }

  private readonly onMessage = (msg: InboundMessage): void => {
    const name = this.deps.topics.requestName(msg.topic);
    if (name === null || msg.payload.length === 0 && msg.retained) return;
    // Every unknown name shares one lane: a lane per name a client makes up would be no bound.
    const admit = this.deps.budget.admit(`bridge ${Object.hasOwn(this.deps.handlers, name) ? name : ''}`);
    if (admit === 'drop') {
      this.refusals.note('bridge_request', 'dropped', 'bridge requests come faster than the agent answers them: not answered', { topic: msg.topic.slice(0, 200), fix: FLOOD_FIX });
      return;
    }
    void this.handle(name, msg, admit === 'refuse').catch((err: unknown) => this.deps.logger.error({ request: name, err: errorMessage(err) }, 'bridge request failed'));
  };

  start(): void {
    this.deps.broker.on('message', this.onMessage);
    this.subscription.start();
  }

  async stop(): Promise<void> {
    this.deps.broker.off('message', this.onMessage);
    this.refusals.stop();
    await this.subscription.stop();
  }

  private async handle(name: string, msg: InboundMessage, overBudget: boolean): Promise<void> {
    const own = this.deps.topics.bridgeResponse(name);
    const responseProblem = msg.responseTopic === undefined || msg.responseTopic === own ? null : responseTopicProblem(msg.responseTopic, this.deps.topics);
    const parsed = parseRequest(msg.payload);
    const transaction = parsed.transaction;
    let answer: Record<string, unknown>;
    try {
      if (msg.retained) {
        this.deps.broker.publish(msg.topic, '', { qos: 1, retain: true }).catch(() => undefined);
        throw new RequestError('retained_request', 'publish bridge requests without the retain flag');
      }
      if (overBudget) throw new RequestError('rate_limited', `too many requests: this one was not carried out; ask again in a second`);
      if (responseProblem) throw new RequestError('invalid_response_topic', `the response topic cannot be used: ${responseProblem}`);
      if ('error' in parsed) throw parsed.error;
      const handler = Object.hasOwn(this.deps.handlers, name) ? this.deps.handlers[name] : undefined;
      if (!handler) throw new RequestError('unknown_request', `no request named "${name.slice(0, 64)}"; known: ${Object.keys(this.deps.handlers).join(', ')}`);
      answer = { status: 'ok', data: (await handler(parsed.params)) ?? null };
      this.deps.logger.info({ request: name }, 'bridge request answered');
    } catch (err) {
      const code = err instanceof RequestError ? err.code : 'failed';
      const message = err instanceof RequestError ? err.message : errorMessage(err);
      if (code === 'rate_limited') {
        // A flood's refusals are a line a minute, not a line each.
        this.refusals.note('bridge_request', code, 'bridge requests come faster than the agent carries them out: answered rate_limited', { topic: msg.topic.slice(0, 200), fix: FLOOD_FIX });
      } else {
        this.deps.metrics?.refused.inc({ what: 'bridge_request', status: code });
        this.deps.logger.warn({ request: name.slice(0, 64), error: code, detail: message }, 'bridge request refused');
      }
      // Zigbee2MQTT's shape: `data` always there, `error` the human message; the stable code beside it.
      answer = { status: 'error', data: {}, error: message, code };
    }
    if (transaction !== undefined) answer['transaction'] = transaction;
    const payload = JSON.stringify(answer);
    const answerWith = (text: string, smallerIfTooLarge = false): Promise<unknown[]> =>
      this.deps.budget.answering(publishAnswer(this.deps.broker, own, msg, responseProblem === null, text, smallerIfTooLarge));
    const tooLarge = (errors: unknown[]): boolean => errors.some((err) => err instanceof BrokerError && err.reasonCode === PACKET_TOO_LARGE);
    let failed = await answerWith(payload, true);
    // Over the broker's size limit (a dozen chairs' summary at a broker with message_size_limit
    // 1024): the smaller form where the request has one, else the caller hears why, not nothing.
    const shorten = answer['status'] === 'ok' && Object.hasOwn(this.deps.shortAnswers ?? {}, name) ? this.deps.shortAnswers?.[name] : undefined;
    if (tooLarge(failed) && shorten) failed = await answerWith(JSON.stringify({ ...answer, data: shorten(answer['data']) }), true);
    if (tooLarge(failed)) {
      const bytes = Buffer.byteLength(payload);
      this.deps.metrics?.refused.inc({ what: 'bridge_request', status: 'too_large' });
      this.deps.logger.warn({ request: name.slice(0, 64), bytes }, 'a bridge answer is larger than the broker takes; answered too_large');
      const error: Record<string, unknown> = {
        status: 'error',
        data: {},
        error: `the answer (${bytes} bytes) is larger than the broker takes: raise its limit (Mosquitto: message_size_limit, max_packet_size), or read it from the agent's HTTP port (GET /api/status)`,
        code: 'too_large',
        ...(transaction !== undefined ? { transaction } : {}),
      };
      failed = await answerWith(JSON.stringify(error));
    }
    for (const err of failed) this.deps.logger.warn({ request: name.slice(0, 64), err: errorMessage(err) }, 'cannot publish a bridge response');
  }
}

type Parsed = { params: Record<string, unknown>; transaction?: string | number } | { error: RequestError; transaction?: string | number };

/** The payload: empty, or a JSON object; `transaction` (text up to 256, or a number) is echoed. */
export function parseRequest(payload: Buffer): Parsed {
  if (payload.length > MAX_REQUEST_BYTES) return { error: new RequestError('invalid_payload', `a request is at most ${MAX_REQUEST_BYTES} bytes`) };
  const text = payload.toString('utf8').trim();
  if (text === '') return { params: {} };
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { error: new RequestError('invalid_payload', 'the payload is not JSON') };
  }
  if (!body || typeof body !== 'object' || Array.isArray(body)) return { error: new RequestError('invalid_payload', 'the payload is not a JSON object') };
  const { transaction, ...params } = body as Record<string, unknown>;
  const echo = (typeof transaction === 'string' && transaction.length <= 256) || (typeof transaction === 'number' && Number.isFinite(transaction)) ? transaction : undefined;
  if (transaction !== undefined && echo === undefined) return { error: new RequestError('invalid_transaction', 'transaction must be text (at most 256) or a number') };
  return echo === undefined ? { params } : { params, transaction: echo };
}
