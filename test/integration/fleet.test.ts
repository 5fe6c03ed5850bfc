import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import mqtt from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Simulator } from '../../agent/simulator/simulator.js';
import { AgentProcess } from '../helpers/agent-process.js';
import { mosquittoPath, startBroker, type TestBroker } from '../helpers/broker.js';
import { freePort } from '../helpers/ports.js';
import { vendorRecord } from '../helpers/records.js';
import { Subscriber } from '../helpers/subscriber.js';
import { waitFor } from '../helpers/wait.js';
import { webhookStatus } from '../helpers/webhook.js';

/**
 * The fleet topology of docs/FLEET.md on loopback, real brokers only: a central Mosquitto (TLS,
 * a client certificate per site, the pattern ACL), two site Mosquittos bridged to it through a
 * link the test can cut, two agents with their own simulators, and a central consumer.
 */
const SITES = ['mall-01', 'airport-02'] as const;
type Site = (typeof SITES)[number];
const KEY = 'fleet-key-0001';
const SECRET = 'fleet-secret-0002';
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * A TCP relay standing for the site's uplink: cut() drops its connections and refuses new ones,
 * mend() relays again. It listens from the first mend() to close(), never in between: its port
 * comes from the kernel's ephemeral range, and while nothing listens there any outgoing
 * connection on the machine (the site bridge's own retries among them) may be given it as its
 * local port, and listening again fails with EADDRINUSE.
 */
class Uplink {
  private server: Server | null = null;
  private open = false;
  private readonly sockets = new Set<Socket>();
  constructor(
    readonly port: number,
    private readonly target: number,
  ) {}
  async mend(): Promise<void> {
    this.open = true;
    if (this.server) return;
    const server = createServer((s) => {
      if (!this.open) {
        s.destroy();
        return;
      }
      const up = connect(this.target, '127.0.0.1');
      for (const x of [s, up]) {
        this.sockets.add(x);
        x.on('close', () => this.sockets.delete(x));
        x.on('error', () => undefined);
      }
      s.pipe(up).pipe(s);
      s.on('close', () => up.destroy());
      up.on('close', () => s.destroy());
    });
    this.server = server;
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', () => resolve()));
  }
  cut(): void {
    this.open = false;
    for (const x of this.sockets) x.destroy();
  }
  async close(): Promise<void> {
    this.cut();
    const s = this.server;
    this.server = null;
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}

const certs = mkdtempSync(join(tmpdir(), 'fleet-certs-'));
const cert = (name: string): { ca: Buffer; cert: Buffer; key: Buffer } => ({
  ca: readFileSync(join(certs, 'ca.crt')),
  cert: readFileSync(join(certs, `${name}.crt`)),
  key: readFileSync(join(certs, `${name}.key`)),
});

let central: TestBroker;
const siteBrokers = new Map<Site, TestBroker>();
const uplinks = new Map<Site, Uplink>();
const sims = new Map<Site, Simulator>();
const agents = new Map<Site, { agent: AgentProcess; port: number }>();
let consumer: Subscriber;

const describeIf = mosquittoPath() ? describe : describe.skip;

beforeAll(async () => {
  const tool = join(ROOT, 'scripts', 'fleet-cert.sh');
  execFileSync(tool, ['ca', certs]);
  execFileSync(tool, ['server', certs, 'central', 'IP:127.0.0.1', 'DNS:localhost']);
  for (const site of [...SITES, 'kiosk-03']) execFileSync(tool, ['site', certs, site]);
  execFileSync(tool, ['client', certs, 'central-consumer']);
  // Mosquitto drops root for its own user before it reads the keys: let it read these test keys.
  // Keys stay as fleet-cert.sh wrote them (0640, group mosquitto): Mosquitto started as root
  // drops to its own user and must still read them, as on a site box.
  for (const f of readdirSync(certs)) if (!f.endsWith('.key')) chmodSync(join(certs, f), 0o644);
  chmodSync(certs, 0o755);
  const acl = join(certs, 'acl');
  writeFileSync(
    acl,
    `# central consumers
user central-consumer
topic readwrite chair-agent/#

# every site, whatever its id: the certificate's CN is the user name
pattern write chair-agent/%u/#
pattern read chair-agent/%u/chairs/+/start
pattern read chair-agent/%u/bridge/request/#
`,
  );
  central = await startBroker({
    persistent: true,
    listener: (port) => `listener ${port} 127.0.0.1
cafile ${certs}/ca.crt
certfile ${certs}/central.crt
keyfile ${certs}/central.key
require_certificate true
use_identity_as_username true
allow_anonymous false
acl_file ${acl}`,
  });
  for (const site of SITES) {
    const uplink = new Uplink(await freePort(), central.port);
    await uplink.mend();
    uplinks.set(site, uplink);
    siteBrokers.set(
      site,
      await startBroker({
        persistent: true,
        extra: `
connection central
address 127.0.0.1:${uplink.port}
remote_clientid ${site}
cleansession false
bridge_protocol_version mqttv311
try_private true
restart_timeout 1 2
keepalive_interval 10
notification_topic chair-agent/${site}/broker/connection
bridge_cafile ${certs}/ca.crt
bridge_certfile ${certs}/${site}.crt
bridge_keyfile ${certs}/${site}.key
topic chair-agent/${site}/# out 1
topic chair-agent/${site}/chairs/+/start in 1
topic chair-agent/${site}/bridge/request/# in 1
`,
      }),
    );
    const sim = new Simulator({ apiKey: KEY, chairs: 3 });
    await sim.start();
    sims.set(site, sim);
  }
  consumer = await Subscriber.connect(`mqtts://127.0.0.1:${central.port}`, ['chair-agent/#'], {
    ...cert('central-consumer'),
    protocolVersion: 5,
    clientId: 'central-consumer',
    clean: false,
    properties: { sessionExpiryInterval: 3600 },
  });
  for (const site of SITES) {
    const dir = mkdtempSync(join(tmpdir(), `fleet-${site}-`));
    const config = join(dir, 'config.yaml');
    writeFileSync(
      config,
      `site: {id: ${site}}
vendor: {baseUrl: "${(sims.get(site) as Simulator).url}", apiKey: ${KEY}, pollSeconds: 0.5}
transactions: {syncSchedule: "0 0 0 1 1 *"}
webhook: {channelSecret: ${SECRET}}
http: {host: 127.0.0.1, port: 0}
mqtt: {url: "${(siteBrokers.get(site) as TestBroker).url}"}
storage: {path: ${join(dir, 'agent.db')}}
gpio: {driver: sim}
log: {level: info}
`,
    );
    const agent = AgentProcess.start(['run', '--config', config]);
    agents.set(site, { agent, port: await agent.httpPort() });
  }
}, 60_000);

afterAll(async () => {
  for (const { agent } of agents.values()) await agent.signal('SIGTERM');
  await consumer?.close();
  for (const s of sims.values()) await s.close();
  for (const u of uplinks.values()) await u.close();
  for (const b of siteBrokers.values()) await b.stop();
  await central?.stop();
});

async function webhook(site: Site): Promise<string> {
  const rec = vendorRecord({ DeviceId: 'MC7001', Status: 'finished' });
  const { port } = agents.get(site) as { port: number };
  expect(await webhookStatus(`http://127.0.0.1:${port}`, rec, SECRET)).toBe(200);
  return String(rec['TransactionId']);
}

const centralTransactions = (site: Site): Set<string> =>
  new Set(
    consumer.messages
      .filter((m) => m.topic.startsWith(`chair-agent/${site}/transactions/`))
      .map((m) => String((JSON.parse(m.text) as { TransactionId: unknown }).TransactionId)),
  );

describeIf('fleet: sites bridged to a central broker', () => {
  it("brings both sites' chair states, bridge state and transactions to the central broker", async () => {
    for (const site of SITES) {
      await consumer.waitFor((m) => m.topic === `chair-agent/${site}/chairs/MC7001` && m.text.includes('"status"'), `${site} chair state`);
      await consumer.waitFor((m) => m.topic === `chair-agent/${site}/bridge/state` && m.text.includes('online'), `${site} online`);
      await consumer.waitFor((m) => m.topic === `chair-agent/${site}/broker/connection` && m.text === '1', `${site} bridge connected`);
      const id = await webhook(site);
      await waitFor(() => centralTransactions(site).has(id), `${site} transaction ${id} at the central broker`);
    }
  });

  it("refuses a site's certificate anything in another site's namespace", async () => {
    const intruder = await mqtt.connectAsync(`mqtts://127.0.0.1:${central.port}`, { ...cert('mall-01'), protocolVersion: 5, clientId: 'intruder', reconnectPeriod: 0 });
    try {
      const forged = JSON.stringify({ TransactionId: 'FORGED-1', Status: 'finished', DeviceId: 'MC7001' });
      await expect(intruder.publishAsync('chair-agent/airport-02/transactions/MC7001', forged, { qos: 1 })).rejects.toThrow();
      // Mosquitto grants the subscription but delivers only what the ACL lets it read: a command
      // for the other site is sent centrally, then one for its own; the second arrives, the first never.
      const seen: string[] = [];
      intruder.on('message', (topic) => seen.push(topic));
      await intruder.subscribeAsync(['chair-agent/airport-02/#', 'chair-agent/mall-01/chairs/+/start'], { qos: 1 });
      const pos = await mqtt.connectAsync(`mqtts://127.0.0.1:${central.port}`, { ...cert('central-consumer'), clientId: 'central-pos-acl', reconnectPeriod: 0 });
      await pos.publishAsync('chair-agent/airport-02/chairs/MC9999/start', '{}', { qos: 1 });
      await pos.publishAsync('chair-agent/mall-01/chairs/MC9999/start', '{}', { qos: 1 });
      await pos.endAsync();
      await waitFor(() => seen.includes('chair-agent/mall-01/chairs/MC9999/start'), "the intruder's own command");
      expect(seen.filter((t) => t.includes('airport-02'))).toEqual([]);
      // A fence: the intruder's own namespace is allowed; once the fence arrives, the forgery would have too.
      const since = consumer.mark();
      await intruder.publishAsync('chair-agent/mall-01/fence', 'fence', { qos: 1 });
      await consumer.waitFor((m) => m.topic === 'chair-agent/mall-01/fence', 'the fence', since);
      expect(consumer.messages.some((m) => m.text.includes('FORGED-1'))).toBe(false);
    } finally {
      await intruder.endAsync(true);
    }
  });

  it('loses no transaction while the uplink is cut and the central broker restarts', async () => {
    const sent = new Map<Site, string[]>(SITES.map((s) => [s, []]));
    const burst = async (n: number): Promise<void> => {
      for (let i = 0; i < n; i++) for (const site of SITES) sent.get(site)?.push(await webhook(site));
    };
    const since = consumer.mark();
    for (const u of uplinks.values()) u.cut();
    // The central broker sees each site's bridge go (its will): the link is really down.
    for (const site of SITES) await consumer.waitFor((m) => m.topic === `chair-agent/${site}/broker/connection` && m.text === '0', `${site} bridge down`, since);
    await burst(15);
    for (const u of uplinks.values()) await u.mend();
    await central.stop();
    await burst(15);
    await central.restart();
    await burst(5);
    for (const site of SITES) {
      await waitFor(
        () => (sent.get(site) as string[]).every((id) => centralTransactions(site).has(id)),
        () => `every ${site} transaction at the central broker; missing ${(sent.get(site) as string[]).filter((id) => !centralTransactions(site).has(id)).join(', ')}`,
        45_000,
      );
    }
  }, 90_000);

  it('carries a start command sent centrally to the right chair and its answer back', { timeout: 60_000 }, async () => {
    const before = SITES.map((s) => (sims.get(s) as Simulator).requests.control);
    const since = consumer.mark();
    const publisher = await mqtt.connectAsync(`mqtts://127.0.0.1:${central.port}`, { ...cert('central-consumer'), clientId: 'central-pos', reconnectPeriod: 0 });
    try {
      await publisher.publishAsync('chair-agent/airport-02/chairs/MC7002/start', JSON.stringify({ minutes: 5, transaction: 'central-1' }), { qos: 1 });
    } finally {
      await publisher.endAsync();
    }
    const answer = await consumer
      .waitFor((m) => m.topic === 'chair-agent/airport-02/chairs/MC7002/start/response', 'the start response', since, 30_000)
      .catch((err: unknown) => {
        const seen = consumer.messages.slice(since).map((m) => `${m.topic} ${m.text.slice(0, 120)}`);
        const log = agents.get('airport-02')?.agent.lines.slice(-15).map((l) => JSON.stringify(l).slice(0, 200));
        throw new Error(`${String(err)}\nseen centrally since:\n${seen.join('\n')}\nagent log:\n${log?.join('\n')}`);
      });
    expect(JSON.parse(answer.text)).toMatchObject({ status: 'ok', transaction: 'central-1' });
    expect((sims.get('airport-02') as Simulator).requests.control).toBe((before[1] as number) + 1);
    expect((sims.get('mall-01') as Simulator).requests.control).toBe(before[0]);
  });

  it('connects an agent with no site broker straight to the central broker with its certificate', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleet-direct-'));
    const config = join(dir, 'config.yaml');
    writeFileSync(
      config,
      `site: {id: kiosk-03}
vendor: {baseUrl: "${(sims.get('mall-01') as Simulator).url}", apiKey: ${KEY}, pollSeconds: 0.5}
transactions: {syncSchedule: "0 0 0 1 1 *"}
webhook: {channelSecret: ${SECRET}}
http: {host: 127.0.0.1, port: 0}
mqtt: {url: "mqtts://localhost:${central.port}", ca: ${certs}/ca.crt, cert: ${certs}/kiosk-03.crt, key: ${certs}/kiosk-03.key}
storage: {path: ${join(dir, 'agent.db')}}
gpio: {driver: sim}
log: {level: info}
`,
    );
    const agent = AgentProcess.start(['run', '--config', config]);
    try {
      await consumer.waitFor((m) => m.topic === 'chair-agent/kiosk-03/bridge/state' && m.text.includes('online'), 'kiosk-03 online centrally');
      await consumer.waitFor((m) => m.topic === 'chair-agent/kiosk-03/chairs/MC7001', 'kiosk-03 chair state centrally');
    } finally {
      expect(await agent.signal('SIGTERM')).toBe(0);
    }
  });
});
