/**
 * The mixed-load soak from the reliability report, against the built agent as systemd runs it:
 * 64 chairs, 20 signed webhooks a second, a start by MQTT every 5 s, the broker killed and
 * restarted every minute, and two status-page viewers reading the live stream. Prints peak RSS
 * and peak RssAnon (what the kernel cannot reclaim) against the unit's MemoryMax=300M; the goal
 * is a peak within 60% of it (180 MiB).
 *
 *   npm run build && sh scripts/node dist/bench/soak.js [minutes]      (default 10)
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt from 'mqtt';
import { signBody } from '../agent/http/sign.js';
import { endpointOptions } from '../agent/mqtt/client-options.js';
import { Simulator } from '../agent/simulator/simulator.js';
import { startAgent, writeAgentConfig } from './lib/agent-proc.js';
import { startBroker } from './lib/broker.js';
import { killLeftovers } from './lib/children.js';
import { freePort, waitForPort } from './lib/ports.js';
import { sleep } from './lib/spawn.js';

process.on('exit', killLeftovers);

const MEMORY_MAX_MIB = 300;
const KEY = 'soak-api-key-0001';
const SECRET = 'soak-webhook-secret-0001';

function memory(pid: number): { rss: number; anon: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string): number => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) / 1024;
  return { rss: kb('VmRSS'), anon: kb('RssAnon') };
}

/** A status-page viewer that reads the stream as a browser does. */
function viewer(port: number): () => void {
  let stopped = false;
  const open = (): void => {
    if (stopped) return;
    const req = request({ host: '127.0.0.1', port, path: '/events' }, (res) => {
      res.on('data', () => undefined);
      res.on('end', () => setTimeout(open, 2_000));
    });
    req.on('error', () => setTimeout(open, 2_000));
    req.end();
  };
  open();
  return () => (stopped = true);
}

async function main(): Promise<void> {
  const minutes = Number(process.argv[2] ?? 10);
  const dir = mkdtempSync(join(tmpdir(), 'soak-'));
  const broker = await startBroker();
  const port = await freePort();
  const sim = new Simulator({ apiKey: KEY, chairs: 64, minuteMs: 1_000, webhook: { url: `http://127.0.0.1:${port}/vendor/webhook`, secret: SECRET } });
  await sim.start();
  const config = writeAgentConfig(
    dir,
    `site: {id: soak}\nvendor: {baseUrl: "${sim.url}", apiKey: ${KEY}, pollSeconds: 1}\nwebhook: {channelSecret: ${SECRET}}\nhttp: {host: 127.0.0.1, port: ${port}}\nmqtt: {url: "${broker.url}"}\nstorage: {path: ${join(dir, 'agent.db')}}\ngpio: {driver: sim}\nlog: {level: warn}\n`,
  );
  const agent = startAgent(config);
  await waitForPort(port);
  const pid = agent.child.pid as number;
  const stopViewers = [viewer(port), viewer(port)];
  const pos = mqtt.connect({ ...endpointOptions({ url: broker.url, protocolVersion: 5, rejectUnauthorized: true }), reconnectPeriod: 500 });

  let peak = { rss: 0, anon: 0 };
  let sent = 0;
  let ok = 0;
  const end = performance.now() + minutes * 60_000;
  const sampler = setInterval(() => {
    const m = memory(pid);
    peak = { rss: Math.max(peak.rss, m.rss), anon: Math.max(peak.anon, m.anon) };
  }, 250);
  const webhooks = setInterval(() => {
    for (let i = 0; i < 2; i++) {
      const body = JSON.stringify({ TransactionId: `SOAK${sent}`, Status: 'finished', DeviceId: `MC${7001 + (sent % 64)}`, Amount: '40.00', PaymentMethod: 'promptpay', TransactionTime: '2026-11-24 12:00:00' });
      sent += 1;
      const req = request({ host: '127.0.0.1', port, path: '/vendor/webhook', method: 'POST', headers: { 'x-vendor-signature': signBody(body, SECRET), 'content-type': 'application/json' } }, (res) => {
        if (res.statusCode === 200) ok += 1;
        res.resume();
      });
      req.on('error', () => undefined);
      req.end(body);
    }
  }, 100);
  let n = 0;
  const starts = setInterval(() => {
    n += 1;
    pos.publish(`chair-agent/soak/chairs/MC${7001 + (n % 64)}/start`, JSON.stringify({ minutes: 1, transaction: `pos-${n}` }), { qos: 1 });
  }, 5_000);
  while (performance.now() < end) {
    await sleep(60_000);
    await broker.kill();
    await sleep(3_000);
    await broker.restart();
  }
  for (const t of [sampler, webhooks, starts]) clearInterval(t);
  for (const s of stopViewers) s();
  const after = memory(pid);
  pos.end(true);
  await agent.stop();
  await sim.close();
  await broker.stop();
  rmSync(dir, { recursive: true, force: true });
  const goal = MEMORY_MAX_MIB * 0.6;
  process.stdout.write(
    `soak ${minutes} min: ${sent} webhooks (${ok} answered 200), peak RSS ${peak.rss.toFixed(1)} MiB, peak RssAnon ${peak.anon.toFixed(1)} MiB, at the end ${after.rss.toFixed(1)} / ${after.anon.toFixed(1)} MiB; goal: peak RSS <= ${goal} MiB (60% of MemoryMax=${MEMORY_MAX_MIB}M): ${peak.rss <= goal ? 'met' : 'NOT met'}\n`,
  );
}

void main();
