/**
 * The baseline for the idle footprint: what a bare mqtt.js script does for the same job. It polls
 * the chair list every second with undici, and publishes each chair's state, retained, when
 * it changed. No database, no HTTP listener, no GPIO, no transaction sync.
 * Usage: node dist/bench/peers/bare-poller.js VENDOR_URL API_KEY BROKER_URL [POLL_SECONDS] [TOPIC_PREFIX]
 */
import mqtt from 'mqtt';
import { request } from 'undici';

const [vendorUrl, apiKey, brokerUrl, pollSeconds = '1', prefix = 'bare'] = process.argv.slice(2);
if (!vendorUrl || !apiKey || !brokerUrl) throw new Error('usage: bare-poller VENDOR_URL API_KEY BROKER_URL');
const client = mqtt.connect(brokerUrl, { clientId: `bare-poller-${prefix}` });
const last = new Map<string, string>();

async function poll(): Promise<void> {
  try {
    const res = await request(new URL('/api/chair/lists', vendorUrl), { headers: { Apikey: apiKey } });
    const body = (await res.body.json()) as { data: { DeviceId: string; data: Record<string, unknown> }[] };
    for (const chair of body.data) {
      const { ServerTime: _t, ...state } = chair.data;
      const text = JSON.stringify({ deviceId: chair.DeviceId, ...state });
      if (last.get(chair.DeviceId) !== text && client.connected) {
        last.set(chair.DeviceId, text);
        client.publish(`${prefix}/chairs/${chair.DeviceId}`, text, { qos: 1, retain: true });
      }
    }
  } catch {
    // next second
  }
  setTimeout(() => void poll(), Number(pollSeconds) * 1000);
}

void poll();
process.on('SIGTERM', () => client.end(false, () => process.exit(0)));
