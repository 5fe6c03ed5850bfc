import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import mqtt from 'mqtt';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Simulator } from '../../agent/simulator/simulator.js';
import { AgentProcess } from '../helpers/agent-process.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { TestRabbit } from '../helpers/rabbitmq.js';
import { vendorRecord } from '../helpers/records.js';
import { Subscriber } from '../helpers/subscriber.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { has, describeWith } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';
import { webhookStatus } from '../helpers/webhook.js';

/**
 * docs/FLEET.md with a central broker of another make: Debian's RabbitMQ (3.10 in Debian 12, its
 * MQTT plugin) as the chain's broker, TLS with a certificate per site (CN = user name), topic
 * permissions that keep each site in its namespace, and a site's Mosquitto bridged to it as the
 * docs say for RabbitMQ (MQTT 3.1.1, try_private false). Central consumers speak MQTT 3.1.1:
 * this RabbitMQ has no MQTT 5.
 */
const SITE = 'mall-01';
const KEY = 'rabbit-key-0001';
const SECRET = 'rabbit-secret-0002';
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const certs = mkdtempSync(join(tmpdir(), 'rabbit-certs-'));
const tls = (name: string) => ({ ca: readFileSync(join(certs, 'ca.crt')), cert: readFileSync(join(certs, `${name}.crt`)), key: readFileSync(join(certs, `${name}.key`)) });

let rabbit: TestRabbit;
let uplink: TcpProxy;
let site: TestBroker;
let sim: Simulator;
let agent: AgentProcess;
let agentPort: number;
let consumer: Subscriber;

const ready = has('mosquitto') && has('rabbitmq');

beforeAll(async () => {
  if (!ready) return;
  const tool = join(ROOT, 'scripts', 'fleet-cert.sh');
  execFileSync(tool, ['ca', certs]);
  execFileSync(tool, ['server', certs, 'central', 'IP:127.0.0.1', 'DNS:localhost']);
  execFileSync(tool, ['site', certs, SITE]);
  execFileSync(tool, ['site', certs, 'airport-02']);
  execFileSync(tool, ['client', certs, 'central-consumer']);
  // RabbitMQ runs as this test's user here; on a central host it reads its key as rabbitmq.
  // The site's Mosquitto, started as root, reads its bridge key as the mosquitto user.
  for (const f of readdirSync(certs)) chmodSync(join(certs, f), 0o644);
  chmodSync(certs, 0o755);
  rabbit = await TestRabbit.start({ ca: join(certs, 'ca.crt'), cert: join(certs, 'central.crt'), key: join(certs, 'central.key') });
  // docs/FLEET.md, "RabbitMQ as the central broker": one user per site, kept to its namespace.
  for (const s of [SITE, 'airport-02']) {
    rabbit.addCertUser(s);
    rabbit.ctl('set_permissions', '-p', '/', s, `^mqtt-subscription-${s}.*`, `^(amq\\.topic|mqtt-subscription-${s}.*)$`, `^(amq\\.topic|mqtt-subscription-${s}.*)$`);
    rabbit.ctl('set_topic_permissions', '-p', '/', s, 'amq.topic', '^chair-agent\\.{username}\\..*', '^chair-agent\\.{username}\\.(chairs\\.\\*\\.start|bridge\\.request\\.#)$');
  }
  rabbit.addCertUser('central-consumer');
  rabbit.ctl('set_permissions', '-p', '/', 'central-consumer', '.*', '.*', '.*');

  uplink = new TcpProxy(rabbit.port);
  await uplink.start();
  site = await startBroker({
    persistent: true,
    extra: `
connection central
address 127.0.0.1:${uplink.port}
remote_clientid ${SITE}
cleansession false
bridge_protocol_version mqttv311
try_private false
restart_timeout 1 2
keepalive_interval 10
notification_topic chair-agent/${SITE}/broker/connection
bridge_cafile ${certs}/ca.crt
bridge_certfile ${certs}/${SITE}.crt
bridge_keyfile ${certs}/${SITE}.key
topic chair-agent/${SITE}/# out 1
topic chair-agent/${SITE}/chairs/+/start in 1
topic chair-agent/${SITE}/bridge/request/# in 1
`,
  });
  sim = new Simulator({ apiKey: KEY, chairs: 3 });
  await sim.start();
  consumer = await Subscriber.connect(`mqtts://127.0.0.1:${rabbit.port}`, ['chair-agent/#'], { ...tls('central-consumer'), protocolVersion: 4, clientId: 'central-consumer', clean: false });
  const dir = mkdtempSync(join(tmpdir(), 'rabbit-site-'));
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    `site: {id: ${SITE}}
vendor: {baseUrl: "${sim.url}", apiKey: ${KEY}, pollSeconds: 0.5}
transactions: {syncSchedule: "0 0 0 1 1 *"}
webhook: {channelSecret: ${SECRET}}
http: {host: 127.0.0.1, port: 0}
mqtt: {url: "${site.url}"}
storage: {path: ${join(dir, 'agent.db')}}
gpio: {driver: sim}
log: {level: info}
`,
  );
  agent = AgentProcess.start(['run', '--config', config]);
  agentPort = await agent.httpPort();
}, 240_000); // RabbitMQ's boot: up to 60 s to its port, then up to 120 s more (test/helpers/rabbitmq.ts)

afterAll(async () => {
  await agent?.signal('SIGTERM');
  await consumer?.close();
  await sim?.close();
  await site?.stop();
  await uplink?.stop();
  await rabbit?.stop();
}, 60_000);

async function webhook(): Promise<string> {
  const rec = vendorRecord({ DeviceId: 'MC7001', Status: 'finished' });
  expect(await webhookStatus(`http://127.0.0.1:${agentPort}`, rec, SECRET)).toBe(200);
  return String(rec['TransactionId']);
}

const central = (): Set<string> =>
  new Set(consumer.messages.filter((m) => m.topic.startsWith(`chair-agent/${SITE}/transactions/`)).map((m) => String((JSON.parse(m.text) as { TransactionId: unknown }).TransactionId)));

describeWith(['mosquitto', 'rabbitmq'], 'fleet with RabbitMQ as the central broker', () => {
  it('brings chair states, bridge state and transactions to RabbitMQ, retained for a late consumer', async () => {
    await consumer.waitFor((m) => m.topic === `chair-agent/${SITE}/chairs/MC7001` && m.text.includes('"status"'), 'chair state', 0, 30_000);
    await consumer.waitFor((m) => m.topic === `chair-agent/${SITE}/bridge/state` && m.text.includes('online'), 'online');
    const id = await webhook();
    await waitFor(() => central().has(id), `transaction ${id} at RabbitMQ`);
    // RabbitMQ keeps retained messages too: a dashboard that connects later sees the chairs.
    const late = await Subscriber.connect(`mqtts://127.0.0.1:${rabbit.port}`, [`chair-agent/${SITE}/chairs/MC7002`], { ...tls('central-consumer'), protocolVersion: 4, clientId: 'late-dashboard' });
    try {
      const state = await late.waitFor(() => true, 'the retained chair state');
      expect(JSON.parse(state.text)).toMatchObject({ deviceId: 'MC7002' });
    } finally {
      await late.close();
    }
  });

  it('carries a start command sent centrally to the chair and its answer back', { timeout: 60_000 }, async () => {
    const before = sim.requests.control;
    const since = consumer.mark();
    const pos = await mqtt.connectAsync(`mqtts://127.0.0.1:${rabbit.port}`, { ...tls('central-consumer'), protocolVersion: 4, clientId: 'central-pos', reconnectPeriod: 0 });
    try {
      // MQTT 3.1.1 has no correlation data: the answer carries the command's transaction.
      await pos.publishAsync(`chair-agent/${SITE}/chairs/MC7002/start`, JSON.stringify({ minutes: 5, transaction: 'rabbit-1' }), { qos: 1 });
    } finally {
      await pos.endAsync();
    }
    const answer = await consumer.waitFor((m) => m.topic === `chair-agent/${SITE}/chairs/MC7002/start/response`, 'the start response', since, 30_000);
    expect(JSON.parse(answer.text)).toMatchObject({ status: 'ok', transaction: 'rabbit-1' });
    expect(sim.requests.control).toBe(before + 1);
  });

  it("closes a site's connection that publishes into another site's namespace; nothing forged arrives", async () => {
    const intruder = await mqtt.connectAsync(`mqtts://127.0.0.1:${rabbit.port}`, { ...tls('airport-02'), protocolVersion: 4, clientId: 'intruder', reconnectPeriod: 0 });
    const closed = new Promise<void>((resolve) => intruder.once('close', () => resolve()));
    intruder.publish(`chair-agent/${SITE}/transactions/MC7001`, JSON.stringify({ TransactionId: 'FORGED-1', Status: 'finished', DeviceId: 'MC7001' }), { qos: 1 });
    // RabbitMQ 3.10 answers a denied publish by closing the connection (MQTT 3.1.1 has no refusal code).
    await closed;
    intruder.end(true);
    // A fence from the site itself: once it arrives, the forgery would have too.
    const id = await webhook();
    await waitFor(() => central().has(id), 'the fence');
    expect(central().has('FORGED-1')).toBe(false);
  });

  it('loses no transaction while the uplink to RabbitMQ is cut', { timeout: 90_000 }, async () => {
    uplink.up = false;
    uplink.cutAll();
    const sent: string[] = [];
    for (let i = 0; i < 10; i++) sent.push(await webhook());
    uplink.up = true;
    await waitFor(() => sent.every((id) => central().has(id)), () => `every transaction at RabbitMQ; missing ${sent.filter((id) => !central().has(id)).join(', ')}`, 60_000);
  });
});
