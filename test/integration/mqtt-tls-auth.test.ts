import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build } from '../../agent/build.js';
import { MqttBroker } from '../../agent/mqtt/mqtt-broker.js';
import { systemClock } from '../../agent/platform/clock.js';
import { runCli } from '../helpers/cli.js';
import { AgentProcess } from '../helpers/agent-process.js';
import { boxCaStore } from '../helpers/ca-store.js';
import { itWith } from '../helpers/tools.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { mosquittoPath } from '../helpers/broker.js';
import { TEST_API_KEY, testConfig } from '../helpers/config.js';
import { memoryLogger } from '../helpers/memory-logger.js';
import { freePort, waitForPort } from '../helpers/ports.js';
import { waitFor } from '../helpers/wait.js';

const mosquitto = mosquittoPath();
const ready = mosquitto !== null && spawnSync('openssl', ['version']).status === 0 && spawnSync('mosquitto_passwd', ['-h']).error === undefined;

const run = (cmd: string, args: string[], cwd: string): void => {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr}`);
};

describe.skipIf(!ready)('MQTT over TLS with a username and password', () => {
  let dir: string;
  let broker: ChildProcess;
  let port: number;
  /** A listener that takes only client certificates the site CA signed. */
  let certPort: number;
  let sim: Simulator;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tls-'));
    // A private CA and a server certificate for 127.0.0.1.
    run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=test-ca', '-keyout', 'ca.key', '-out', 'ca.pem'], dir);
    run('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', 'server.key', '-out', 'server.csr'], dir);
    writeFileSync(join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
    run('openssl', ['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'san.ext', '-out', 'server.pem'], dir);
    // Client certificates: one the CA signed, one it did not (self-signed), and a key of neither.
    run('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=site-agent', '-keyout', 'client.key', '-out', 'client.csr'], dir);
    run('openssl', ['x509', '-req', '-in', 'client.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-out', 'client.pem'], dir);
    run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=site-agent', '-keyout', 'stranger.key', '-out', 'stranger.pem'], dir);
    run('openssl', ['genpkey', '-algorithm', 'RSA', '-out', 'other.key'], dir);
    writeFileSync(join(dir, 'passwd'), '');
    run('mosquitto_passwd', ['-b', join(dir, 'passwd'), 'site-agent', 'broker-pass-8642'], dir);
    port = await freePort();
    certPort = await freePort();
    const tls = `cafile ${join(dir, 'ca.pem')}\ncertfile ${join(dir, 'server.pem')}\nkeyfile ${join(dir, 'server.key')}\n`;
    writeFileSync(
      join(dir, 'mosquitto.conf'),
      `allow_anonymous false\npassword_file ${join(dir, 'passwd')}\npersistence false\nlistener ${port} 127.0.0.1\n${tls}listener ${certPort} 127.0.0.1\n${tls}require_certificate true\n`,
    );
    spawnSync('chmod', ['-R', 'a+rX', dir]);
    broker = spawn(mosquitto as string, ['-c', join(dir, 'mosquitto.conf')], { stdio: 'ignore' });
    await waitForPort(port);
    await waitForPort(certPort);
    sim = new Simulator({ apiKey: TEST_API_KEY });
    await sim.start();
  });

  afterAll(async () => {
    await sim.close();
    broker.kill();
  });

  const agentWith = (mqtt: Record<string, unknown>) => {
    const log = memoryLogger('info', ['broker-pass-8642']);
    const agent = build(testConfig({ vendorUrl: sim.url, brokerUrl: `mqtts://127.0.0.1:${port}` }, { site: { id: 'tls' }, mqtt }), { logger: log.logger });
    return { agent, log };
  };

  it('connects with mqtts://, the site CA, a username and a password', async () => {
    const { agent, log } = agentWith({ ca: join(dir, 'ca.pem'), username: 'site-agent', password: 'broker-pass-8642' });
    await agent.start();
    await waitFor(() => agent.broker.connected, 'a TLS connection');
    await agent.stop();
    expect(log.raw.join('')).not.toContain('broker-pass-8642');
  });

  it('says why when the password is wrong, keeps running, and never logs the password', async () => {
    const { agent, log } = agentWith({ ca: join(dir, 'ca.pem'), username: 'site-agent', password: 'not-the-pass-1357' });
    await agent.start();
    const line = await waitFor(() => log.lines.find((l) => l.msg === 'broker connection error'), 'the refusal in the log');
    expect(String(line['err'])).toMatch(/Not authorized|Bad username or password/);
    expect(agent.health.get('broker').ok).toBe(false);
    await agent.stop();
    expect(log.raw.join('')).not.toContain('not-the-pass-1357');
  });

  // A renewal or a restore that leaves a TLS file unreadable, then a reboot: before 0.3.9 the
  // config was refused (exit 78, which systemd does not restart), and the buttons stopped with it.
  it('runs without a TLS file it cannot read yet: the rest of the agent works, and says why', async () => {
    const later = join(dir, 'not-yet-ca.pem');
    const { agent, log } = agentWith({ ca: later, username: 'site-agent', password: 'broker-pass-8642' });
    await agent.start();
    const line = log.lines.find((l) => /^broker connection not started/.test(l.msg));
    expect(line?.msg).toBe(`broker connection not started: mqtt.ca: cannot read ${later} (ENOENT); tried again every minute`);
    await waitFor(() => agent.health.get('vendor').ok, 'the vendor polled meanwhile');
    expect(agent.broker.connected).toBe(false);
    expect(agent.health.get('broker')).toMatchObject({ ok: false, detail: `mqtt.ca: cannot read ${later} (ENOENT)` });
    await agent.stop();
  });

  it('connects once the file can be read, without a restart', async () => {
    const later = join(dir, 'copied-later-ca.pem');
    const log = memoryLogger('info', ['broker-pass-8642']);
    const broker = new MqttBroker({ url: `mqtts://127.0.0.1:${port}`, ca: later, username: 'site-agent', password: 'broker-pass-8642', rejectUnauthorized: true, protocolVersion: 5, clientId: 'files-later', keepaliveSeconds: 30, reconnectSeconds: 2, will: { topic: 'files/state', payload: 'offline' }, clock: systemClock, logger: log.logger, filesRetryMs: 100 });
    broker.connect();
    await broker.firstAttempt();
    expect(broker.connected).toBe(false);
    copyFileSync(join(dir, 'ca.pem'), later);
    await waitFor(() => broker.connected, 'the connection once the CA is there');
    await broker.publish('files/state', 'online', { qos: 1 });
    await broker.end(1_000);
    // Said once, not at every try.
    expect(log.lines.filter((l) => /^broker connection not started/.test(l.msg))).toHaveLength(1);
  });

  it('fails `chair-agent check` on such a file (exit 78), so an installer sees it', async () => {
    const config = join(dir, 'check.yaml');
    writeFileSync(config, `site: {id: x}\nvendor: {baseUrl: "https://x", apiKey: k-1234}\nwebhook: {enabled: false}\nmqtt: {url: "mqtts://127.0.0.1:${port}", ca: ${join(dir, 'absent-ca.pem')}}\n`);
    const check = await runCli(['check', '--config', config]);
    expect(check.code).toBe(78);
    expect(check.stderr).toContain(`mqtt.ca: cannot read ${join(dir, 'absent-ca.pem')} (ENOENT)`);
  });

  it('names a client key that is not its certificate\'s, in check and in /healthz, and runs on', async () => {
    const config = join(dir, 'pair.yaml');
    const [cert, key] = [join(dir, 'client.pem'), join(dir, 'other.key')];
    writeFileSync(config, `site: {id: x}\nvendor: {baseUrl: "https://x", apiKey: k-1234}\nwebhook: {enabled: false}\nmqtt: {url: "mqtts://127.0.0.1:${certPort}", ca: ${join(dir, 'ca.pem')}, cert: ${cert}, key: ${key}}\n`);
    const check = await runCli(['check', '--config', config]);
    expect(check.code).toBe(78);
    expect(check.stderr).toContain(`mqtt.key: ${key} does not belong to the certificate in ${cert}`);
    const { agent } = agentWith({ ca: join(dir, 'ca.pem'), cert, key, username: 'site-agent', password: 'broker-pass-8642' });
    await agent.start();
    expect(agent.health.get('broker')).toMatchObject({ ok: false, detail: `mqtt.key: ${key} does not belong to the certificate in ${cert}` });
    await agent.stop();
  });

  it('takes a renewed client certificate at its next reconnect, without a restart', async () => {
    // The box's certificate is one the broker does not take (here: not the site CA's; in the
    // field, one that has expired). Its renewal is copied over it while the agent keeps retrying.
    const [cert, key] = [join(dir, 'renewed.pem'), join(dir, 'renewed.key')];
    copyFileSync(join(dir, 'stranger.pem'), cert);
    copyFileSync(join(dir, 'stranger.key'), key);
    const log = memoryLogger('info', ['broker-pass-8642']);
    const broker = new MqttBroker({ url: `mqtts://127.0.0.1:${certPort}`, ca: join(dir, 'ca.pem'), cert, key, username: 'site-agent', password: 'broker-pass-8642', rejectUnauthorized: true, protocolVersion: 5, clientId: 'renewed', keepaliveSeconds: 30, reconnectSeconds: 1, will: { topic: 'renewed/state', payload: 'offline' }, clock: systemClock, logger: log.logger });
    broker.connect();
    await waitFor(() => log.lines.find((l) => l.msg === 'broker connection error'), 'the broker refusing the certificate');
    expect(broker.connected).toBe(false);
    // A half-done copy first: the new certificate beside the old key. Not taken, said once.
    let closes = 0;
    broker.on('close', () => (closes += 1));
    copyFileSync(join(dir, 'client.pem'), cert);
    await waitFor(() => log.lines.find((l) => /^broker TLS files changed, but cannot be used/.test(l.msg)), 'the half-done copy noticed');
    const seen = closes;
    await waitFor(() => closes >= seen + 3, 'three more attempts with the files loaded before');
    expect(broker.connected).toBe(false);
    // Each said once, however many attempts.
    expect(log.lines.filter((l) => /^broker TLS files changed, but cannot be used/.test(l.msg))).toHaveLength(1);
    expect(log.lines.filter((l) => l.msg === 'broker connection error')).toHaveLength(1);
    copyFileSync(join(dir, 'client.key'), key);
    await waitFor(() => broker.connected, 'the connection with the renewed certificate');
    expect(log.lines.filter((l) => l.msg === 'broker TLS files changed; connecting with the new ones')).toHaveLength(1);
    await broker.publish('renewed/state', 'online', { qos: 1 });
    await broker.end(1_000);
  });

  itWith('update-ca-certificates', "trusts the site CA from the box's own store (update-ca-certificates) without mqtt.ca: the built agent from the CLI connects", async () => {
    const store = boxCaStore(join(dir, 'store'), join(dir, 'ca.pem'));
    const config = join(dir, 'store.yaml');
    writeFileSync(
      config,
      `site: {id: tls-store}\nvendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}}\nwebhook: {channelSecret: s}\nhttp: {host: 127.0.0.1, port: 0}\nmqtt: {url: "mqtts://127.0.0.1:${port}", username: site-agent, password: broker-pass-8642}\nstorage: {path: ${join(dir, 'store.db')}}\ngpio: {driver: sim, chairs: [{deviceId: MC7001, button: 17, led: 27}]}\n`,
    );
    const agent = AgentProcess.start(['run', '--config', config], store);
    try {
      await agent.waitForLog((l) => l.msg === 'connected to the broker', 'a TLS connection trusted through the box store');
    } finally {
      expect(await agent.signal('SIGTERM')).toBe(0);
    }
  });

  it('refuses a broker certificate from an unknown CA', async () => {
    const { agent, log } = agentWith({ username: 'site-agent', password: 'broker-pass-8642' });
    await agent.start();
    const line = await waitFor(() => log.lines.find((l) => l.msg === 'broker connection error'), 'the TLS refusal');
    expect(String(line['err'])).toMatch(/self[- ]signed|unable to verify|certificate/i);
    expect(agent.broker.connected).toBe(false);
    await agent.stop();
  });
});
