import type { Logger } from '../logger.js';
import { errorMessage } from '../errors.js';
import type { Component } from '../components/component.js';
import type { StartService } from '../start/start-service.js';
import type { Broker, InboundMessage } from './broker.js';
import type { Topics } from './topics.js';

export interface StartCommand {
  minutes?: number;
  transaction?: string | number;
}

/** The payload of B/chairs/<id>/start: {"minutes":5,"transaction":"abc"}, both optional. */
export function parseStartCommand(payload: Buffer, minMinutes: number, maxMinutes: number): StartCommand | { error: string; transaction?: string | number } {
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
  const echo = typeof transaction === 'string' || typeof transaction === 'number' ? { transaction } : {};
  if (transaction !== undefined && !('transaction' in echo)) return { error: 'invalid_transaction' };
  const minutes = b['minutes'];
  if (minutes !== undefined && (typeof minutes !== 'number' || !Number.isInteger(minutes) || minutes < minMinutes || minutes > maxMinutes)) {
    return { error: 'invalid_minutes', ...echo };
  }
  return { ...(minutes === undefined ? {} : { minutes }), ...echo };
}

/**
 * Start commands from other site systems. Each gets one answer on .../start/response, and also
 * on the MQTT 5 response topic with the correlation data when the request carried them.
 * A retained command is never acted on: it would start the chair again at every reconnect.
 */
export class MqttStartCommands implements Component {
  readonly name = 'mqtt-start-commands';

  constructor(
    private readonly deps: { broker: Broker; topics: Topics; starts: StartService; logger: Logger; minMinutes: number; maxMinutes: number },
  ) {}

  private readonly subscribe = (): void => {
    this.deps.broker.subscribe(this.deps.topics.startFilter).catch((err: unknown) => {
      this.deps.logger.warn({ err: errorMessage(err) }, 'cannot subscribe to start commands');
    });
  };

  private readonly onMessage = (msg: InboundMessage): void => {
    const deviceId = this.deps.topics.startTarget(msg.topic);
    if (deviceId === null) return;
    if (msg.retained) {
      this.deps.logger.warn({ topic: msg.topic }, 'ignored a retained start command; publish start commands without the retain flag');
      return;
    }
    void this.handle(deviceId, msg);
  };

  start(): void {
    this.deps.broker.on('connect', this.subscribe);
    this.deps.broker.on('message', this.onMessage);
    if (this.deps.broker.connected) this.subscribe();
  }

  async stop(): Promise<void> {
    this.deps.broker.off('connect', this.subscribe);
    this.deps.broker.off('message', this.onMessage);
    await this.deps.broker.unsubscribe(this.deps.topics.startFilter);
  }

  private async handle(deviceId: string, msg: InboundMessage): Promise<void> {
    const command = parseStartCommand(msg.payload, this.deps.minMinutes, this.deps.maxMinutes);
    let answer: Record<string, unknown>;
    if ('error' in command) {
      this.deps.logger.warn({ deviceId, error: command.error }, 'bad start command');
      answer = { status: 'error', error: command.error };
    } else {
      const outcome = await this.deps.starts.startChair(deviceId, { minutes: command.minutes, source: 'mqtt' });
      answer = outcome.ok ? { status: 'ok' } : { status: 'error', error: outcome.error };
    }
    if ('transaction' in command && command.transaction !== undefined) answer['transaction'] = command.transaction;
    const payload = JSON.stringify(answer);
    const sends = [this.deps.broker.publish(this.deps.topics.startResponse(deviceId), payload, { qos: 1 })];
    if (msg.responseTopic) {
      sends.push(this.deps.broker.publish(msg.responseTopic, payload, { qos: 1, ...(msg.correlationData ? { correlationData: msg.correlationData } : {}) }));
    }
    const results = await Promise.allSettled(sends);
    for (const r of results) {
      if (r.status === 'rejected') this.deps.logger.warn({ deviceId, err: errorMessage(r.reason) }, 'cannot publish a start response');
    }
  }
}
