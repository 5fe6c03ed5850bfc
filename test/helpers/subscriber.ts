import mqtt, { type MqttClient } from 'mqtt';

export interface Received {
  topic: string;
  text: string;
  retain: boolean;
  properties?: { correlationData?: Buffer; responseTopic?: string };
}

/** An MQTT client that records what it receives and can wait for a message. */
export class Subscriber {
  readonly messages: Received[] = [];
  private waiters: { pred: (m: Received) => boolean; resolve: (m: Received) => void }[] = [];

  private constructor(readonly client: MqttClient) {
    client.on('message', (topic, payload, packet) => {
      const m: Received = { topic, text: payload.toString(), retain: packet.retain };
      if (packet.properties) m.properties = packet.properties as Received['properties'];
      this.messages.push(m);
      this.waiters = this.waiters.filter((w) => {
        if (!w.pred(m)) return true;
        w.resolve(m);
        return false;
      });
    });
  }

  static async connect(url: string, topics: string | string[], options: mqtt.IClientOptions = {}): Promise<Subscriber> {
    const client = await mqtt.connectAsync(url, { reconnectPeriod: 200, ...options });
    const sub = new Subscriber(client);
    await client.subscribeAsync(topics, { qos: 1 });
    return sub;
  }

  /** A position in the received messages: pass it to waitFor to look only at what came after. */
  mark(): number {
    return this.messages.length;
  }

  /**
   * The first matching message received after `since` (default: any, including those already
   * received), waiting for it when it has not come yet.
   */
  waitFor(pred: (m: Received) => boolean, what = 'a message', since = 0, timeoutMs = 15_000): Promise<Received> {
    const seen = this.messages.slice(since).find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeoutMs);
      this.waiters.push({
        pred,
        resolve: (m) => {
          clearTimeout(t);
          resolve(m);
        },
      });
    });
  }

  /** The latest message on a topic. */
  last(topic: string): Received | undefined {
    for (let i = this.messages.length - 1; i >= 0; i--) if (this.messages[i]?.topic === topic) return this.messages[i];
    return undefined;
  }

  async close(): Promise<void> {
    await this.client.endAsync(true);
  }
}

/**
 * Whether the broker holds a retained message on `topic`, without waiting for a timeout: a marker
 * is published after the subscription is acknowledged, and the broker delivers the retained
 * message (if any) before it.
 */
export async function retainedOn(url: string, topic: string): Promise<string | null> {
  const marker = `${topic}/marker-${Math.random().toString(16).slice(2)}`;
  const sub = await Subscriber.connect(url, [topic, marker]);
  try {
    await sub.client.publishAsync(marker, 'marker', { qos: 1 });
    await sub.waitFor((m) => m.topic === marker, 'the marker');
    return sub.messages.find((m) => m.topic === topic && m.retain)?.text ?? null;
  } finally {
    await sub.close();
  }
}
