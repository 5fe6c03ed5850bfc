import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../observe/metrics.js';
import { errorMessage } from '../platform/errors.js';
import type { Component } from '../platform/component.js';
import type { Clock } from '../platform/clock.js';
import { RefusalLog } from '../observe/refusal-log.js';
import type { StartService } from '../start/start-service.js';
import type { Broker, InboundMessage } from './broker.js';
import { HeldSubscription } from './held-subscription.js';
import { FLOOD_FIX, type RequestBudget } from './request-budget.js';
import { topicNameProblem, type Topics } from './topics.js';

/** A start command is a few dozen bytes; anything over this is refused before it is parsed. */
export const MAX_COMMAND_BYTES = 4096;

export interface StartCommand {
  minutes?: number;
  transaction?: string | number;
}

type Refusal = { error: string; transaction?: string | number };

/** The payload of B/chairs/<id>/start: {"minutes":5,"transaction":"abc"}, both optional. */
export function parseStartCommand(payload: Buffer, minMinutes: number, maxMinutes: number): StartCommand | Refusal {
  if (payload.length > MAX_COMMAND_BYTES) return { error: 'invalid_payload' };
  const text = payload.toString('utf8').trim();
  if (text === '') return {};
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { error: 'invalid_payload' };
  }
  if (!body || typeof body !== 'object' || Array.isArray(body)) return { error: 'invalid_payload' };
  const b = body as Record<string, unknown>;
  const transaction = b['transaction'];
  const echo = (typeof transaction === 'string' && transaction.length <= 256) || (typeof transaction === 'number' && Number.isFinite(transaction)) ? { transaction } : {};
  if (transaction !== undefined && !('transaction' in echo)) return { error: 'invalid_transaction' };
  const minutes = b['minutes'];
  if (minutes !== undefined && (typeof minutes !== 'number' || !Number.isInteger(minutes) || minutes < minMinutes || minutes > maxMinutes)) {
    return { error: 'invalid_minutes', ...echo };
  }
  return { ...(minutes === undefined ? {} : { minutes }), ...echo };
}

/**
 * Why a request's MQTT 5 response topic must not be answered on, or null. An invalid topic would
 * make the broker drop the agent's connection; one inside the agent's own namespace would let a
 * client make the agent publish, say, a fake transaction.
 */
export function responseTopicProblem(topic: string, topics: Topics): string | null {
  const problem = topicNameProblem(topic);
  if (problem) return problem;
  if (topics.owns(topic)) return `it is inside the agent's own topics (${topics.base}/...)`;
  return null;
}

/**
 * Sends an answer to its own topic and, when the request carried a usable MQTT 5 response topic
 * (one `responseTopicProblem` accepts), there too with the request's correlation data. Resolves
 * to the publishes that failed.
 */
export async function publishAnswer(broker: Broker, own: string, msg: InboundMessage, responseUsable: boolean, payload: string, smallerIfTooLarge = false): Promise<unknown[]> {
  const size = smallerIfTooLarge ? { smallerIfTooLarge } : {};
  const sends = [broker.publish(own, payload, { qos: 1, ...size })];
  if (msg.responseTopic !== undefined && msg.responseTopic !== own && responseUsable) {
    sends.push(broker.publish(msg.responseTopic, payload, { qos: 1, ...size, ...(msg.correlationData ? { correlationData: msg.correlationData } : {}) }));
  }
  return (await Promise.allSettled(sends)).flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
}

export interface StartCommandsDeps {
  broker: Broker;
  topics: Topics;
  starts: StartService;
  logger: Logger;
  metrics?: Metrics;
  clock: Clock;
  /** Shared with the bridge requests: how many commands are carried out, answered, or dropped. */
  budget: RequestBudget;
  minMinutes: number;
  maxMinutes: number;
  /** The chairs the agent knows, to map a topic level back to its DeviceId. */
  knownChairs: () => string[];
}

/**
 * Start commands from other site systems. Each gets one answer on .../start/response, and also
 * on the MQTT 5 response topic with the correlation data when the request carried them.
 *
 * Refused without starting anything: a payload over 4 KiB, a response topic that is invalid or
 * inside the agent's namespace, and a retained command. With MQTT 5 the agent subscribes with
 * Retain As Published, so a command published with the retain flag is recognised when it is
 * delivered live as well as at every reconnect; it is answered "retained_command" and cleared
 * from the broker (an empty retained message), so it cannot start a chair later. With MQTT 3.1.1
 * a broker clears the flag on live delivery: such a command is acted on once, when published,
 * and refused (and cleared) when it is replayed. A zero-byte payload (how a retained message is
 * cleared) is ignored. A client that repeats commands in a loop is held to the request budget
 * (request-budget.ts): each chair a few a second, then `rate_limited`, then not answered.
 */
export class MqttStartCommands implements Component {
  readonly name = 'mqtt-start-commands';
  private readonly refusals: RefusalLog;
  private readonly subscription: HeldSubscription;

  constructor(private readonly deps: StartCommandsDeps) {
    this.refusals = new RefusalLog({ clock: deps.clock, logger: deps.logger, metrics: deps.metrics });
    // Retain As Published: a retained message is recognised as such when delivered live too.
    this.subscription = new HeldSubscription(deps.broker, deps.topics.startFilter, { retainAsPublished: true }, deps.logger, 'start commands');
  }

  private readonly onMessage = (msg: InboundMessage): void => {
    const deviceId = this.deps.topics.startTarget(msg.topic, this.deps.knownChairs());
    if (deviceId === null) return;
    if (msg.payload.length === 0) {
      this.deps.logger.debug({ topic: msg.topic }, 'empty start message (a retained message being cleared); ignored');
      return;
    }
    const admit = this.deps.budget.admit(`start ${deviceId}`);
    if (admit === 'drop') {
      this.refusals.note('start', 'dropped', 'start commands come faster than the agent answers them: not answered, no chair started', { deviceId, topic: msg.topic.slice(0, 200), fix: FLOOD_FIX });
      return;
    }
    void this.handle(deviceId, msg, admit === 'refuse').catch((err: unknown) => this.deps.logger.error({ deviceId, err: errorMessage(err) }, 'start command failed'));
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

  private refuse(deviceId: string, error: string, detail: Record<string, unknown>): Record<string, unknown> {
    this.deps.metrics?.refused.inc({ what: 'start', status: error });
    this.deps.logger.warn({ deviceId, error, ...detail }, 'start command refused; no chair was started');
    return { status: 'error', error };
  }

  private async handle(deviceId: string, msg: InboundMessage, overBudget: boolean): Promise<void> {
    const command = parseStartCommand(msg.payload, this.deps.minMinutes, this.deps.maxMinutes);
    const responseProblem = msg.responseTopic === undefined ? null : responseTopicProblem(msg.responseTopic, this.deps.topics);
    let answer: Record<string, unknown>;
    if (msg.retained) {
      answer = this.refuse(deviceId, 'retained_command', { topic: msg.topic, hint: 'publish start commands without the retain flag' });
      // Cleared so it cannot be replayed at the next reconnect.
      this.deps.broker.publish(msg.topic, '', { qos: 1, retain: true }).catch(() => undefined);
    } else if (overBudget) {
      // A flood's refusals are a line a minute, not a line each.
      this.refusals.note('start', 'rate_limited', 'start commands come faster than the agent carries them out: answered rate_limited, no chair started', { deviceId, topic: msg.topic.slice(0, 200), fix: FLOOD_FIX });
      answer = { status: 'error', error: 'rate_limited' };
    } else if (responseProblem) {
      answer = this.refuse(deviceId, 'invalid_response_topic', { responseTopic: msg.responseTopic?.slice(0, 200), problem: responseProblem });
    } else if ('error' in command) {
      answer = this.refuse(deviceId, command.error, { bytes: msg.payload.length });
    } else {
      const outcome = await this.deps.starts.startChair(deviceId, { minutes: command.minutes, source: 'mqtt', transaction: command.transaction });
      answer = outcome.ok ? { status: 'ok' } : { status: 'error', error: outcome.error };
    }
    if ('transaction' in command && command.transaction !== undefined) answer['transaction'] = command.transaction;
    const failed = await this.deps.budget.answering(publishAnswer(this.deps.broker, this.deps.topics.startResponse(deviceId), msg, responseProblem === null, JSON.stringify(answer)));
    for (const err of failed) this.deps.logger.warn({ deviceId, err: errorMessage(err) }, 'cannot publish a start response');
  }
}
