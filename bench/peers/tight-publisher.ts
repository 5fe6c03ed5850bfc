/**
 * The flush peer: a tight mqtt.js QoS 1 publisher of the same payloads the agent publishes. It
 * keeps a bounded window in flight (the broker's Receive Maximum, as MQTT 5 requires, at most
 * 100), refills it as PUBACKs come, and batches its writes (cork/uncork per refill). It reconnects
 * every 100 ms while the broker is away, and exits once every message is acknowledged.
 * Usage: node dist/bench/peers/tight-publisher.js BROKER_URL MESSAGES.jsonl
 * (one {"topic":...,"payload":...} per line). Prints "connected" and "done" on stdout.
 */
import { readFileSync } from 'node:fs';
import mqtt from 'mqtt';

const [url, file] = process.argv.slice(2);
if (!url || !file) throw new Error('usage: tight-publisher BROKER_URL MESSAGES.jsonl');
const messages = readFileSync(file, 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((l) => JSON.parse(l) as { topic: string; payload: string });

const client = mqtt.connect(url, { protocolVersion: 5, clientId: `tight-${process.pid}`, reconnectPeriod: 100, clean: true });
let next = 0;
let acked = 0;
let inFlight = 0;

function pump(): void {
  const connack = (client as unknown as { connackPacket?: { properties?: { receiveMaximum?: number } } }).connackPacket;
  const window = Math.min(100, connack?.properties?.receiveMaximum ?? 65_535);
  const stream = client.stream as { cork?: () => void; uncork?: () => void };
  stream.cork?.();
  while (inFlight < window && next < messages.length) {
    const m = messages[next++] as { topic: string; payload: string };
    inFlight++;
    client.publish(m.topic, m.payload, { qos: 1 }, (err) => {
      inFlight--;
      if (err) {
        next = Math.min(next, acked); // resent after the reconnect, in order
        return;
      }
      acked++;
      if (acked === messages.length) {
        process.stdout.write('done\n');
        client.end(false, () => process.exit(0));
      } else pump();
    });
  }
  process.nextTick(() => stream.uncork?.());
}

client.on('connect', () => {
  (client.stream as { setNoDelay?: (b: boolean) => void }).setNoDelay?.(true);
  process.stdout.write('connected\n');
  pump();
});
