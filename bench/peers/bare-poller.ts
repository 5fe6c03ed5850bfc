/**
 * The baseline for start-up, the idle footprint and CPU per chair: the least a script can do for
 * the same job. It polls the chair list every period with Node's built-in fetch and publishes each
 * chair's state, retained, when it changed, as soon as both the list and the broker connection are
 * there (whichever comes second). No database, HTTP listener, GPIO, transaction sync or logging;
 * no HTTP client library beside Node's own.
 * Usage: node dist/bench/peers/bare-poller.js VENDOR_URL API_KEY BROKER_URL [POLL_SECONDS] [TOPIC_PREFIX]
 */
import mqtt from 'mqtt';

const [vendorUrl, apiKey, brokerUrl, pollSeconds = '1', prefix = 'bare'] = process.argv.slice(2);
if (!vendorUrl || !apiKey || !brokerUrl) throw new Error('usage: bare-poller VENDOR_URL API_KEY BROKER_URL');
const client = mqtt.connect(brokerUrl, { clientId: `bare-poller-${prefix}` });
const listUrl = new URL('/api/chair/lists', vendorUrl);
const published = new Map<string, string>();
let latest: { DeviceId: string; data: Record<string, unknown> }[] = [];

function publishChanged(): void {
  if (!client.connected) return;
  for (const chair of latest) {
    const { ServerTime: _t, ...state } = chair.data;
    const text = JSON.stringify({ deviceId: chair.DeviceId, ...state });
    if (published.get(chair.DeviceId) === text) continue;
    published.set(chair.DeviceId, text);
    client.publish(`${prefix}/chairs/${chair.DeviceId}`, text, { qos: 1, retain: true });
  }
}

async function poll(): Promise<void> {
  try {
    const res = await fetch(listUrl, { headers: { Apikey: apiKey as string } });
    latest = ((await res.json()) as { data: typeof latest }).data;
    publishChanged();
  } catch {
    // next period
  }
  setTimeout(() => void poll(), Number(pollSeconds) * 1000);
}

client.on('connect', publishChanged);
void poll();
process.on('SIGTERM', () => client.end(false, () => process.exit(0)));
