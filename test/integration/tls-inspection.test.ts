import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { build } from '../../agent/build.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { AgentProcess } from '../helpers/agent-process.js';
import { boxCaStore } from '../helpers/ca-store.js';
import { startBroker } from '../helpers/broker.js';
import { runCli } from '../helpers/cli.js';
import { TEST_API_KEY, TEST_SECRET, testConfig } from '../helpers/config.js';
import { memoryLogger } from '../helpers/memory-logger.js';
import { freePort } from '../helpers/ports.js';
import { startSquid, tlsFront, type SiteProxy } from '../helpers/site-proxies.js';
import { describeWith, has } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';

// A site whose proxy inspects TLS (airports', malls' and offices' networks): it ends the vendor's
// TLS itself and presents a certificate for the vendor's name signed by the site's own CA, which
// the box must trust. The counterpart is Debian's squid-openssl with ssl_bump, as such sites run it.

let dir: string;
let sim: Simulator;
/** The vendor over HTTPS, with a certificate from the vendor's CA (a public one, in life). */
let front: Server;
let frontPort: number;

const openssl = (args: string[]): void => void spawnSync('openssl', args, { cwd: dir });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'inspect-'));
  // squid, started as root, runs as its own user: its logs and certificate database are here.
  chmodSync(dir, 0o777);
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 3 });
  await sim.start();
  if (!has('openssl')) return;
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  openssl(['req', '-x509', ...ec, '-days', '2', '-subj', '/CN=vendor-ca', '-keyout', 'vendor-ca.key', '-out', 'vendor-ca.pem']);
  openssl(['req', ...ec, '-subj', '/CN=localhost', '-keyout', 'vendor.key', '-out', 'vendor.csr']);
  // The vendor is reached by name (squid makes its certificate for the name asked for), the broker
  // as 127.0.0.1 (squid 6 takes localhost for ::1, where Mosquitto does not listen here).
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  openssl(['x509', '-req', '-in', 'vendor.csr', '-CA', 'vendor-ca.pem', '-CAkey', 'vendor-ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'san.ext', '-out', 'vendor.pem']);
  openssl(['req', '-x509', ...ec, '-days', '2', '-subj', '/CN=site-inspection-ca', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign', '-keyout', 'site-ca.key', '-out', 'site-ca.pem']);
  for (const f of ['vendor-ca.pem', 'vendor.pem', 'vendor.key', 'site-ca.pem', 'site-ca.key']) chmodSync(join(dir, f), 0o644);
  const simPort = Number(new URL(sim.url).port);
  ({ server: front, port: frontPort } = await tlsFront(join(dir, 'vendor.pem'), join(dir, 'vendor.key'), simPort));
});
afterAll(async () => {
  front?.close();
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

function config(name: string, vendor: string, chair = 'MC7001'): string {
  const path = join(dir, `${name}.yaml`);
  writeFileSync(
    path,
    `site: {id: inspected}\nvendor: {baseUrl: "https://localhost:${frontPort}", apiKey: ${TEST_API_KEY}, ${vendor}}\nwebhook: {channelSecret: ${TEST_SECRET}}\nhttp: {host: 127.0.0.1, port: 0}\nmqtt: {url: "mqtt://127.0.0.1:1"}\nstorage: {path: ${join(dir, `${name}.db`)}}\ngpio: {driver: sim, chairs: [{deviceId: ${chair}, button: 17, led: 27}]}\n`,
  );
  return path;
}

const vendorLine = (stdout: string): string => stdout.split('\n').find((l) => /^(ok|FAIL)\s+vendor API/.test(l)) ?? `(no vendor line)\n${stdout}`;

it('check refuses a vendor.ca with no certificate in it, naming the key (exit 78)', async () => {
  writeFileSync(join(dir, 'junk.pem'), 'not a certificate\n');
  const r = await runCli(['check', '--config', config('junk', `ca: ${join(dir, 'junk.pem')}`)]);
  expect(r.code).toBe(78);
  expect(r.stderr).toContain(`vendor.ca: ${join(dir, 'junk.pem')} holds no PEM certificate`);
});

it('a vendor.ca the agent cannot read at start: said once, and the agent runs on (buttons, LEDs and the outbox do not need the vendor)', async () => {
  const { logger, lines } = memoryLogger('info');
  const agent = build(testConfig({ vendorUrl: sim.url, brokerUrl: 'mqtt://127.0.0.1:1' }, { vendor: { ca: join(dir, 'missing.pem') } }), { logger });
  await agent.start();
  try {
    expect(lines.filter((l) => l.msg === 'vendor.ca cannot be used: the vendor is reached with the usual CAs only')).toHaveLength(1);
    // The vendor here is plain HTTP, which vendor.ca does not concern: polling goes on.
    await waitFor(() => lines.find((l) => l.msg === 'vendor API reachable'), 'the vendor polled');
  } finally {
    await agent.stop();
  }
});

describeWith('openssl', 'a vendor with a private CA, reached directly', () => {
  it('vendor.ca trusts it, and the usual CAs still serve (NODE_EXTRA_CA_CERTS added to them, not replaced)', async () => {
    const bare = await runCli(['doctor', '--config', config('private-bare', 'retries: 0')]);
    expect(vendorLine(bare.stdout)).toMatch(/is not trusted \(UNABLE_TO_VERIFY_LEAF_SIGNATURE\)/);
    const trusted = await runCli(['doctor', '--config', config('private', `ca: ${join(dir, 'vendor-ca.pem')}`)]);
    expect(vendorLine(trusted.stdout)).toMatch(/^ok {4}vendor API .*3 chair\(s\) listed/);
    // A CA in NODE_EXTRA_CA_CERTS is one of the usual ones: vendor.ca adds to it.
    const both = await runCli(['doctor', '--config', config('private-extra', `ca: ${join(dir, 'site-ca.pem')}`)], { NODE_EXTRA_CA_CERTS: join(dir, 'vendor-ca.pem') });
    expect(vendorLine(both.stdout)).toMatch(/^ok {4}vendor API/);
  });
});

/**
 * The built agent from the CLI with this config (and environment): doctor passes the vendor, the
 * agent polls it, and a press on simulated GPIO starts a chair. Returns the agent's log lines.
 */
async function startsAChair(path: string, env: Record<string, string> = {}): Promise<readonly Record<string, unknown>[]> {
  expect(vendorLine((await runCli(['doctor', '--config', path], env)).stdout)).toMatch(/^ok {4}vendor API .*3 chair\(s\) listed/);
  const agent = AgentProcess.start(['run', '--config', path], env);
  try {
    const up = await agent.waitForLog((l) => l.msg === 'HTTP listener up', 'listening');
    await agent.waitForLog((l) => l.msg === 'vendor API reachable', 'the vendor polled through the proxy');
    const res = await fetch(`http://127.0.0.1:${String(up['port'])}/sim/gpio/17/press`, { method: 'POST' });
    expect(res.status).toBe(200);
    await agent.waitForLog((l) => l.msg === 'chair started', 'the start through the proxy');
  } finally {
    expect(await agent.signal('SIGTERM')).toBe(0);
  }
  return agent.lines;
}

/**
 * squid-openssl inspecting every tunnel, as a site's does: it ends the TLS and presents a
 * certificate signed by the site's CA. `splice` names server names it lets through untouched.
 */
function startInspectingSquid(name: string, splice: string[] = [], access: string[] = []): Promise<SiteProxy> {
  const certgen = '/usr/lib/squid/security_file_certgen';
  const db = join(dir, `${name}-ssl_db`);
  spawnSync(certgen, ['-c', '-s', db, '-M', '4MB']);
  spawnSync('chmod', ['-R', 'a+rwX', db]);
  return startSquid(dir, name, {
    sslPorts: ['1025-65535'],
    access,
    portOptions: `ssl-bump generate-host-certificates=on dynamic_cert_mem_cache_size=4MB tls-cert=${join(dir, 'site-ca.pem')} tls-key=${join(dir, 'site-ca.key')}`,
    extra: [
      `sslcrtd_program ${certgen} -s ${db} -M 4MB`,
      'sslcrtd_children 2 startup=1 idle=1',
      'acl step1 at_step SslBump1',
      'ssl_bump peek step1',
      // The exception doctor tells a site's IT to make for the broker.
      ...(splice.length > 0 ? [`acl broker ssl::server_name ${splice.join(' ')}`, 'ssl_bump splice broker'] : []),
      'ssl_bump bump all',
      // The vendor's CA is a public one in life; here squid is told it.
      `tls_outgoing_options cafile=${join(dir, 'vendor-ca.pem')}`,
    ],
  });
}

describeWith(['squid with ssl-bump', 'openssl'], "the vendor through the site's TLS-inspecting proxy (squid-openssl, ssl_bump)", () => {
  let squid: SiteProxy;
  let squidPort: number;
  const access = (): string => squid.log();
  beforeAll(async () => {
    squid = await startInspectingSquid('squid');
    squidPort = squid.port;
  });
  afterAll(() => void squid?.child.kill());

  it("without vendor.ca: doctor says the certificate is not trusted and where the site's CA goes", async () => {
    const r = await runCli(['doctor', '--config', config('untrusted', `proxy: "http://127.0.0.1:${squidPort}"`)]);
    expect(vendorLine(r.stdout)).toMatch(/^FAIL {2}vendor API .*is not trusted \(SELF_SIGNED_CERT_IN_CHAIN\): where the site's network inspects TLS .*its CA goes in the box's CA store \(update-ca-certificates\) or in vendor\.ca/);
    expect(r.stdout).toContain(`hint: openssl s_client -connect localhost:${frontPort} -proxy 127.0.0.1:${squidPort} -showcerts`);
  });

  it('with a vendor.ca that is not the proxy\'s CA: doctor says the file was tried', async () => {
    const r = await runCli(['doctor', '--config', config('wrong-ca', `proxy: "http://127.0.0.1:${squidPort}", ca: ${join(dir, 'vendor-ca.pem')}`)]);
    expect(vendorLine(r.stdout)).toContain(`signed by none of the usual CAs, the box's CA store, nor ${join(dir, 'vendor-ca.pem')} (vendor.ca)`);
  });

  it("with the site's CA in vendor.ca, the built agent from the CLI polls and starts a chair through the inspecting proxy", async () => {
    const path = config('trusted', `proxy: "http://127.0.0.1:${squidPort}", ca: ${join(dir, 'site-ca.pem')}`);
    await startsAChair(path);
    // squid ended the TLS, so it saw the control call itself.
    await waitFor(() => (access().includes(`POST https://localhost:${frontPort}/api/chair/control`) ? true : undefined), "squid's log of the control call");
  });
});

describeWith(['squid with ssl-bump', 'openssl'], 'answers the inspecting proxy makes itself, in the vendor\'s place', () => {
  it("the vendor out of the proxy's reach: said as the proxy's 503, not the vendor's", async () => {
    const squid = await startInspectingSquid('squid-unreachable');
    try {
      const closed = await freePort();
      const path = join(dir, 'gone.yaml');
      writeFileSync(path, readFileSync(config('gone-src', `proxy: "${squid.url}", ca: ${join(dir, 'site-ca.pem')}`), 'utf8').replace(`localhost:${frontPort}`, `localhost:${closed}`));
      const r = await runCli(['doctor', '--config', path]);
      expect(vendorLine(r.stdout)).toMatch(new RegExp(`^FAIL {2}vendor API .*the proxy ${squid.url} answered HTTP 503 in place of localhost:${closed} \\(ERR_CONNECT_FAIL[^)]*\\): the proxy could not reach the vendor`));
    } finally {
      squid.child.kill();
    }
  });

  it("the proxy's rules refuse the start call: the start fails as refused by the proxy, not as a rejected Apikey", async () => {
    const squid = await startInspectingSquid('squid-deny', [], ['acl control urlpath_regex ^/api/chair/control', 'http_access deny control']);
    try {
      const path = config('denied', `proxy: "${squid.url}", ca: ${join(dir, 'site-ca.pem')}`);
      const r = await runCli(['start', 'MC7002', '-m', '2', '--config', path]);
      expect(r.code).not.toBe(0);
      expect(r.stdout + r.stderr).toMatch(new RegExp(`the proxy ${squid.url} answered HTTP 403 in place of localhost:${frontPort} \\(ERR_ACCESS_DENIED[^)]*\\): the proxy's rules refuse this request`));
      expect(r.stdout + r.stderr).not.toContain('Apikey');
    } finally {
      squid.child.kill();
    }
  });
});

describeWith(['squid with ssl-bump', 'update-ca-certificates'], "the site's CA in the box's own store (update-ca-certificates), no vendor.ca", () => {
  let squid: SiteProxy;
  beforeAll(async () => {
    squid = await startInspectingSquid('squid-store');
  });
  afterAll(() => void squid?.child.kill());

  it('the built agent from the CLI trusts it: doctor passes, it polls and starts a chair through the inspecting proxy', async () => {
    // The other chair: the vendor.ca case above started the first one, which still runs (the
    // proxy above refused the start of this one).
    const path = config('store', `proxy: "http://127.0.0.1:${squid.port}"`, 'MC7002');
    const store = boxCaStore(join(dir, 'site-store'), join(dir, 'site-ca.pem'));
    await startsAChair(path, store);
  });

  it('a certificate in the store that cannot be read does not take the site\'s CA with it: the agent trusts the rest, and says which file', async () => {
    // A line lost when a branch office's CA was pasted from an e-mail. Debian's
    // update-ca-certificates copies it into the bundle unread, before the site's CA (by name).
    const pasted = readFileSync(join(dir, 'vendor-ca.pem'), 'utf8').split('\n');
    pasted.splice(2, 1);
    const store = boxCaStore(join(dir, 'broken-store'), join(dir, 'site-ca.pem'), { 'branch-office.crt': pasted.join('\n') });
    const path = config('store-broken', `proxy: "http://127.0.0.1:${squid.port}"`, 'MC7003');
    const doctor = await runCli(['doctor', '--config', path], store);
    const broken = join(dir, 'broken-store', 'local', 'branch-office.crt');
    expect(doctor.stdout).toContain(`FAIL  CA store    ${store['SSL_CERT_FILE']} holds 1 certificate(s) that cannot be read (from ${broken})`);
    expect(doctor.stdout).toContain(`hint: ${broken} must hold PEM certificates only, or be removed; then sudo update-ca-certificates --fresh`);
    const agent = await startsAChair(path, store);
    const said = agent.filter((l) => typeof l.msg === 'string' && l.msg.startsWith("the box's CA store"));
    expect(said).toHaveLength(1);
    expect(said[0]).toMatchObject({ component: 'vendor', unreadable: 1, files: [broken] });
  });

  it("the site's CA exported from Windows as DER and renamed .crt: doctor says so and how to convert it, and once converted the agent trusts it", async () => {
    const der = join(dir, 'der-store', 'site-ca.der');
    mkdirSync(join(dir, 'der-store'), { recursive: true });
    openssl(['x509', '-in', 'site-ca.pem', '-outform', 'DER', '-out', der]);
    // In the store as the site's IT put it: the DER file as site-ca.crt, and no PEM of it.
    const store = boxCaStore(join(dir, 'der-store'), der);
    const path = config('store-der', `proxy: "http://127.0.0.1:${squid.port}", retries: 0`);
    const doctor = await runCli(['doctor', '--config', path], store);
    const file = join(dir, 'der-store', 'local', 'site-ca.crt');
    expect(vendorLine(doctor.stdout)).toMatch(/is not trusted \(SELF_SIGNED_CERT_IN_CHAIN\): .*; the box's CA store holds what cannot be read \(doctor names the file\)$/);
    expect(doctor.stdout).toContain(`FAIL  CA store    ${store['SSL_CERT_FILE']} holds a file that is not PEM text (a DER certificate?) (from ${file})`);
    expect(doctor.stdout).toContain(`a DER one converts with sudo openssl x509 -inform der -in ${file} -out /tmp/ca.crt`);
    // Converted as the hint says, and the store made again.
    openssl(['x509', '-inform', 'der', '-in', file, '-out', join(dir, 'der-store', 'converted.crt')]);
    const fixed = boxCaStore(join(dir, 'der-fixed'), join(dir, 'der-store', 'converted.crt'));
    const again = await runCli(['doctor', '--config', path], fixed);
    expect(vendorLine(again.stdout)).toMatch(/^ok {4}vendor API/);
    expect(again.stdout).not.toContain('CA store');
  });

  it("a store without the site's CA: still not trusted, and vendor.ca still adds to the store", async () => {
    const other = boxCaStore(join(dir, 'other-store'), join(dir, 'vendor-ca.pem'));
    const untrusted = await runCli(['doctor', '--config', config('store-other', `proxy: "http://127.0.0.1:${squid.port}", retries: 0`)], other);
    expect(vendorLine(untrusted.stdout)).toMatch(/is not trusted \(SELF_SIGNED_CERT_IN_CHAIN\)/);
    const both = await runCli(['doctor', '--config', config('store-both', `proxy: "http://127.0.0.1:${squid.port}", ca: ${join(dir, 'site-ca.pem')}`)], other);
    expect(vendorLine(both.stdout)).toMatch(/^ok {4}vendor API/);
  });
});

describeWith(['squid with ssl-bump', 'mosquitto', 'openssl'], "the broker through the site's TLS-inspecting proxy", () => {
  it('inspected, the broker is said to be behind the inspection and doctor says which exception to ask for; with squid splicing the broker\'s name as told, the agent connects', async () => {
    // The broker's certificate (127.0.0.1), from a CA of its own: the centre's.
    const brokerPort = await freePort();
    const broker = await startBroker({
      listener: (p) => `listener ${p} 127.0.0.1\nallow_anonymous true\nlistener ${brokerPort} 127.0.0.1\ncertfile ${join(dir, 'vendor.pem')}\nkeyfile ${join(dir, 'vendor.key')}`,
    });
    const inspecting = await startInspectingSquid('squid-broker');
    const path = join(dir, 'broker.yaml');
    const write = (proxyPort: number): void =>
      writeFileSync(
        path,
        `site: {id: inspected-broker}\nvendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}}\nwebhook: {channelSecret: ${TEST_SECRET}}\nhttp: {host: 127.0.0.1, port: 0}\nmqtt: {url: "mqtts://127.0.0.1:${brokerPort}", ca: ${join(dir, 'vendor-ca.pem')}, proxy: "http://127.0.0.1:${proxyPort}"}\nstorage: {path: ${join(dir, 'broker.db')}}\n`,
      );
    try {
      write(inspecting.port);
      const r = await runCli(['doctor', '--config', path]);
      const line = r.stdout.split('\n').find((l) => /^(ok|FAIL)\s+broker/.test(l)) ?? r.stdout;
      expect(line).toMatch(/^FAIL {2}broker .*not trusted \(SELF_SIGNED_CERT_IN_CHAIN\): through mqtt\.proxy, most likely the proxy inspecting TLS/);
      expect(r.stdout).toContain(`hint: ask the site's IT to exempt 127.0.0.1:${brokerPort} from TLS inspection (squid: acl broker ssl::server_name 127.0.0.1, then ssl_bump splice broker before its bump rule)`);
    } finally {
      inspecting.child.kill();
    }
    const splicing = await startInspectingSquid('squid-splice', ['127.0.0.1']);
    write(splicing.port);
    const agent = AgentProcess.start(['run', '--config', path]);
    try {
      await agent.waitForLog((l) => l.msg === 'connected to the broker', 'connected through the splicing proxy');
      expect(agent.lines.filter((l) => l.msg === 'broker connection error')).toEqual([]);
    } finally {
      expect(await agent.signal('SIGTERM')).toBe(0);
      splicing.child.kill();
      await broker.stop();
    }
  });
});
