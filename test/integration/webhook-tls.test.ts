import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent as HttpsClient, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, parseConfig, tlsFileProblems } from '../../agent/config/load.js';
import { runCli } from '../helpers/cli.js';
import type { Config } from '../../agent/config/schema.js';
import { webhookCertificateCheck } from '../../agent/cli/commands/doctor.js';
import { HttpListener } from '../../agent/http/listener.js';
import { ServedCertificate } from '../../agent/http/served-certificate.js';
import { signBody } from '../../agent/http/sign.js';
import { Metrics } from '../../agent/observe/metrics.js';
import { WebhookSender } from '../../agent/simulator/webhook-sender.js';
import { systemClock } from '../../agent/platform/clock.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { memoryLogger } from '../helpers/memory-logger.js';
import { startRig, type Rig } from '../helpers/rig.js';
import { Subscriber } from '../helpers/subscriber.js';
import { TEST_SECRET } from '../helpers/config.js';
import { vendorRecord } from '../helpers/records.js';
import { describeWith } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';
import { freePort } from '../helpers/ports.js';

/**
 * `webhook.cert` and `webhook.key`: the webhook's own port serves HTTPS, as a vendor's cloud
 * expects of a URL on the internet. Real certificates made by OpenSSL, a real TLS listener on
 * loopback, real TLS clients that check the certificate, and the simulator's sender.
 */
const dir = mkdtempSync(join(tmpdir(), 'webhook-tls-'));

/** A self-signed certificate for 127.0.0.1 and its key, valid `days` days from now. */
function makePair(name: string, days: number): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  const r = spawnSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', String(days), '-subj', `/CN=${name}`, '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`openssl: ${r.stderr}`);
  return { cert, key };
}

const fingerprint = (pemFile: string): string => new X509Certificate(readFileSync(pemFile)).fingerprint256;

/** The certificate a client that trusts `caFile` is shown at `port`: rejects when the client refuses it. */
function servedFingerprint(port: number, caFile: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, ca: readFileSync(caFile) }, () => {
      resolve(socket.getPeerCertificate().fingerprint256);
      socket.end();
    });
    socket.once('error', reject);
  });
}

/** A handler held until released: `entering` resolves once a request is inside it. */
function gate(): { entering: Promise<void>; entered: () => void; released: Promise<void>; release: () => void } {
  let entered = (): void => undefined;
  let release = (): void => undefined;
  const entering = new Promise<void>((resolve) => (entered = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  return { entering, entered: () => entered(), released, release: () => release() };
}

/** A TCP connection to the port that says nothing. */
function openSocket(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
}

describeWith('openssl', 'the webhook port over HTTPS: its certificate', () => {
  const clock = new FakeClock(Date.now());
  const metrics = new Metrics({ defaultMetrics: false });
  const { logger, lines } = memoryLogger();
  let live: { cert: string; key: string };
  let listener: HttpListener;
  let port: number;
  const held = gate();

  beforeAll(async () => {
    const first = makePair('first', 30);
    live = { cert: join(dir, 'live.crt'), key: join(dir, 'live.key') };
    copyFileSync(first.cert, live.cert);
    copyFileSync(first.key, live.key);
    const certificate = new ServedCertificate({ files: live, keys: { cert: 'webhook.cert', key: 'webhook.key' }, clock, logger, checkMs: 60_000 });
    // Four connections before the quietest give way, eight from one address: a flood is cheap to make.
    listener = new HttpListener({ host: '127.0.0.1', port: 0, logger, clock, metrics, certificate, maxConnections: 4 });
    listener.route('POST', '/vendor/webhook', (_req, res) => void res.end('{}'), 'webhook');
    listener.route('POST', '/held', async (req, res) => {
      req.resume();
      held.entered();
      await held.released;
      res.end('{}');
    }, 'webhook');
    await listener.start();
    port = listener.address().port;
  });

  afterAll(async () => {
    await listener.stop();
  });

  it('is served to a client that checks it, with its expiry in the start line', async () => {
    expect(await servedFingerprint(port, live.cert)).toBe(fingerprint(live.cert));
    // The TCP connection under the TLS one is let go when it closes: none is held for good.
    await waitFor(() => listener.openConnections() === 0, 'the connection forgotten');
    const up = lines.find((l) => l.msg === 'HTTP listener up');
    expect(up).toMatchObject({ tls: true, certificateExpires: new Date(new X509Certificate(readFileSync(live.cert)).validTo).toISOString() });
  });

  it('answers no plain HTTP on that port: the connection is closed and the refusal counted', async () => {
    const answer = await new Promise<string>((resolve) => {
      const s = connect(port, '127.0.0.1', () => s.write('POST /vendor/webhook HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}'));
      let got = '';
      s.on('data', (d: Buffer) => (got += d.toString('latin1')));
      s.on('close', () => resolve(got));
      s.on('error', () => undefined);
    });
    expect(answer).not.toMatch(/^HTTP\/1\.1 200/);
    await waitFor(() => metrics.refused.render().includes('chair_agent_refused_requests_total{what="http",status="tls"} 1'), 'the refusal in the metrics');
    expect(lines.some((l) => l.msg === 'TLS handshake failed; connection closed' && l.level === 'warn')).toBe(true);
  });

  it('never closes a webhook in flight to make room, behind TLS as on plain HTTP', async () => {
    const client = new HttpsClient({ connect: { ca: readFileSync(live.cert) } });
    const answer = request(`https://127.0.0.1:${port}/held`, { method: 'POST', body: '{}', dispatcher: client });
    await held.entering;
    // Past the grace a new connection gets to send its request, then a flood from the same address.
    await clock.advance(1_000);
    const flood = await Promise.all(Array.from({ length: 12 }, () => openSocket(port)));
    await waitFor(() => listener.openConnections() >= 12, 'the listener to take the flood in');
    held.release();
    const r = await answer;
    expect(r.statusCode).toBe(200);
    await r.body.dump();
    for (const s of flood) s.destroy();
    await client.close();
  });

  it('keeps serving the old certificate while a renewal is half written, and the new one once it is whole', async () => {
    const renewed = makePair('renewed', 90);
    const before = fingerprint(live.cert);
    // The key first, as a copy of two files lands: the new key does not fit the old certificate.
    copyFileSync(renewed.key, live.key);
    await clock.advance(60_000);
    expect(lines.filter((l) => l.msg === 'new certificate files not loaded; still serving the previous certificate')).toHaveLength(1);
    expect(await servedFingerprint(port, live.cert)).toBe(before);
    // Looked at again a minute later, unchanged: no second warning.
    await clock.advance(60_000);
    expect(lines.filter((l) => l.msg === 'new certificate files not loaded; still serving the previous certificate')).toHaveLength(1);

    copyFileSync(renewed.cert, live.cert);
    await clock.advance(60_000);
    expect(lines.some((l) => l.msg === 'certificate reloaded')).toBe(true);
    // No restart: the same listener, on the same port, shows a new connection the new certificate.
    expect(await servedFingerprint(port, renewed.cert)).toBe(fingerprint(renewed.cert));
    const r = await request(`https://127.0.0.1:${port}/vendor/webhook`, { method: 'POST', body: '{}', dispatcher: new HttpsClient({ connect: { ca: readFileSync(renewed.cert) } }) });
    expect(r.statusCode).toBe(200);
    await r.body.dump();
  });

  it('warns, once a day, when the certificate served is within two weeks of its expiry', async () => {
    const warnings = (): number => lines.filter((l) => l.level === 'warn' && /^certificate expires in \d+ days \(webhook\.cert\)/.test(l.msg)).length;
    expect(warnings()).toBe(0);
    clock.jump(80 * 86_400_000); // the renewed certificate (90 days) now has under 14 left
    await clock.advance(60_000);
    expect(warnings()).toBe(1);
    await clock.advance(60 * 60_000);
    expect(warnings()).toBe(1);
    await clock.advance(24 * 60 * 60_000);
    expect(warnings()).toBe(2);
  });
});

describeWith('openssl', 'the webhook port over HTTPS: files that do not load at start', () => {
  it('keeps the port closed without failing the start, and serves once the files are fixed', async () => {
    const clock = new FakeClock(Date.now());
    const { logger, lines } = memoryLogger();
    const a = makePair('late-a', 30);
    const b = makePair('late-b', 30);
    const files = { cert: join(dir, 'late.crt'), key: join(dir, 'late.key') };
    copyFileSync(a.cert, files.cert);
    copyFileSync(b.key, files.key);
    const port = await freePort();
    const certificate = new ServedCertificate({ files, keys: { cert: 'webhook.cert', key: 'webhook.key' }, clock, logger });
    const listener = new HttpListener({ host: '127.0.0.1', port, label: 'webhook listener', logger, clock, certificate });
    await listener.start();
    try {
      expect(lines.find((l) => l.level === 'error')?.msg).toBe(
        `webhook listener not started: webhook.key: ${files.key} does not belong to the certificate in ${files.cert}; it starts once its certificate files load (looked at every minute)`,
      );
      await expect(servedFingerprint(port, a.cert)).rejects.toThrow(/ECONNREFUSED/);
      expect(listener.certificateStatus()).toEqual({ expiresAt: null, problem: `webhook.key: ${files.key} does not belong to the certificate in ${files.cert}` });

      copyFileSync(a.key, files.key);
      await clock.advance(60_000);
      await waitFor(() => lines.some((l) => l.msg === 'webhook listener up'), 'the listener up');
      expect(await servedFingerprint(port, a.cert)).toBe(fingerprint(a.cert));
      expect(listener.certificateStatus()).toMatchObject({ problem: null });
    } finally {
      await listener.stop();
    }
  });
});

describeWith(['mosquitto', 'openssl'], 'an agent whose webhook certificate does not load', () => {
  it('runs everything else, and says why in bridge/info', async () => {
    const a = makePair('agent-a', 30);
    const b = makePair('agent-b', 30);
    const rig = await startRig({ site: 'tls-broken', sections: { webhook: { port: 0, cert: a.cert, key: b.key } } });
    try {
      // The vendor polled and the broker connected: healthy, with no webhook port listening.
      await waitFor(async () => {
        const r = await fetch(`${rig.base}/healthz`);
        await r.arrayBuffer();
        return r.status === 200;
      }, '/healthz 200');
      const info = await Subscriber.connect(rig.broker.url, 'chair-agent/tls-broken/bridge/info');
      try {
        const m = await info.waitFor(() => true, 'bridge/info');
        expect((JSON.parse(m.text) as { webhookCertificate?: unknown }).webhookCertificate).toEqual({
          expiresAt: null,
          problem: `webhook.key: ${b.key} does not belong to the certificate in ${a.cert}`,
        });
      } finally {
        await info.close();
      }
    } finally {
      await rig.close();
    }
  }, 30_000);
});

describeWith('openssl', 'the webhook port over HTTPS: `check`', () => {
  const base = (webhook: string): string => `site: {id: x}\nvendor: {baseUrl: "https://x", apiKey: k-1234}\nwebhook: {channelSecret: s, ${webhook}}\n`;
  const problems = (yaml: string): string[] => tlsFileProblems(parseConfig(yaml, 'c.yaml', { env: {} }).config);

  it('takes a certificate and its key on the webhook port', () => {
    const p = makePair('check-ok', 30);
    expect(problems(base(`port: 8443, cert: ${p.cert}, key: ${p.key}`))).toEqual([]);
  });

  it('says which file is wrong, and never prints a key', () => {
    const a = makePair('check-a', 30);
    const b = makePair('check-b', 30);
    const junk = join(dir, 'junk.crt');
    writeFileSync(junk, 'not a certificate\n');
    expect(problems(base(`port: 8443, cert: ${a.cert}, key: ${b.key}`))).toEqual([`webhook.key: ${b.key} does not belong to the certificate in ${a.cert}`]);
    expect(problems(base(`port: 8443, cert: ${junk}, key: ${a.key}`))).toEqual([`webhook.cert: ${junk} is not a PEM certificate`]);
    const swapped = problems(base(`port: 8443, cert: ${a.cert}, key: ${a.cert}`));
    expect(swapped).toHaveLength(1);
    expect(swapped[0]).toMatch(/^webhook\.key: .* is not a usable PEM private key/);
    expect(problems(base(`port: 8443, cert: ${join(dir, 'none.crt')}, key: ${a.key}`))).toEqual([`webhook.cert: cannot read ${join(dir, 'none.crt')} (ENOENT)`]);
    const encrypted = join(dir, 'encrypted.key');
    spawnSync('openssl', ['pkey', '-in', a.key, '-aes256', '-passout', 'pass:not-on-a-box', '-out', encrypted]);
    expect(problems(base(`port: 8443, cert: ${a.cert}, key: ${encrypted}`))).toEqual([
      `webhook.key: ${encrypted} is encrypted: the agent starts unattended, so give it the key without a passphrase (openssl pkey -in KEY -out PLAIN)`,
    ]);
    const keyText = readFileSync(a.key, 'utf8').split('\n')[1] ?? '';
    expect(problems(base(`port: 8443, cert: ${a.key}, key: ${a.key}`)).join('\n')).not.toContain(keyText);
  });

  it('fails `chair-agent check` (exit 78), while other commands still read the config', async () => {
    const a = makePair('cli-a', 30);
    const b = makePair('cli-b', 30);
    const config = join(dir, 'cli.yaml');
    writeFileSync(config, `${base(`port: 8443, cert: ${a.cert}, key: ${b.key}`)}storage: {path: ${join(dir, 'cli.db')}}\n`);
    const check = await runCli(['check', '--config', config]);
    expect(check.code).toBe(78);
    expect(check.stderr).toContain(`webhook.key: ${b.key} does not belong to the certificate in ${a.cert}`);
    // outbox reads the config and goes on to the database (none here): the files are not its business.
    const outbox = await runCli(['outbox', '--config', config]);
    expect(outbox.stderr).toContain(`no database at ${join(dir, 'cli.db')}`);
    expect(outbox.stderr).not.toContain('webhook.key');
  });
});

describeWith('openssl', 'the webhook port over HTTPS: `doctor`', () => {
  it('names whom the certificate is for and when it expires, and fails two weeks before', () => {
    const p = makePair('doctor', 30);
    const yaml = `site: {id: x}\nvendor: {baseUrl: "https://x", apiKey: k-1234}\nwebhook: {channelSecret: s, port: 8443, cert: ${p.cert}, key: ${p.key}}\n`;
    const { config } = parseConfig(yaml, 'c.yaml', { env: {} });
    const expires = new Date(new X509Certificate(readFileSync(p.cert)).validTo).toISOString().slice(0, 10);
    expect(webhookCertificateCheck(config, Date.now(), null)).toEqual([{ name: 'https', ok: true, detail: `port 8443: 127.0.0.1; expires on ${expires}, in 29 days` }]);
    const late = webhookCertificateCheck(config, Date.now() + 20 * 86_400_000, null);
    expect(late).toMatchObject([{ ok: false, detail: `port 8443: 127.0.0.1; expires on ${expires}, in 9 day(s)` }]);
    expect(webhookCertificateCheck(config, Date.now() + 31 * 86_400_000, null)).toMatchObject([{ ok: false, detail: `port 8443: 127.0.0.1; expired on ${expires}` }]);
  });
});

describeWith('openssl', 'the webhook port over HTTPS: `doctor` and the service\'s user', () => {
  // doctor runs as root, who reads every file; the service runs as another account, here one
  // that shares the files' group, as chair-agent shares the key's in OPERATIONS.md.
  const service = { name: 'chair-agent', uid: (process.getuid?.() ?? 0) + 4242, gid: process.getgid?.() ?? 0, groups: [], hidden: [], writable: null, stateDirectories: [], readOnlyBy: '' };
  const setUp = (name: string): { config: Config; tls: string; pair: { cert: string; key: string } } => {
    const tls = mkdtempSync(join(dir, `${name}-`));
    const made = makePair(name, 30);
    const pair = { cert: join(tls, 'webhook.crt'), key: join(tls, 'webhook.key') };
    copyFileSync(made.cert, pair.cert);
    copyFileSync(made.key, pair.key);
    chmodSync(dir, 0o755);
    chmodSync(tls, 0o750);
    chmodSync(pair.cert, 0o644);
    chmodSync(pair.key, 0o640);
    const yaml = `site: {id: x}\nvendor: {baseUrl: "https://x", apiKey: k-1234}\nwebhook: {channelSecret: s, port: 8443, cert: ${pair.cert}, key: ${pair.key}}\n`;
    return { config: parseConfig(yaml, 'c.yaml', { env: {} }).config, tls, pair };
  };

  it('passes a key the service reads by its group', () => {
    const { config } = setUp('group');
    expect(webhookCertificateCheck(config, Date.now(), service)).toMatchObject([{ ok: true }]);
  });

  it('fails a key the service cannot reach, before the service stops on it', () => {
    const { config, tls, pair } = setUp('owner-only');
    chmodSync(pair.key, 0o600);
    expect(webhookCertificateCheck(config, Date.now(), service)).toMatchObject([{ ok: false, detail: `${pair.key} is not readable by chair-agent, the service's user: its webhook port would stay closed` }]);
    chmodSync(pair.key, 0o640);
    chmodSync(tls, 0o700);
    expect(webhookCertificateCheck(config, Date.now(), service)).toMatchObject([{ ok: false, detail: `${tls} is not searchable by chair-agent, the service's user: its webhook port would stay closed` }]);
  });

  it('reports a key that is not there as missing, not as out of the service\'s reach', () => {
    const { config, pair } = setUp('missing');
    rmSync(pair.key);
    expect(webhookCertificateCheck(config, Date.now(), service)).toMatchObject([{ ok: false, detail: `webhook.key: cannot read ${pair.key} (ENOENT)` }]);
  });

  it('fails a key every user on the box can read', () => {
    const { config, pair } = setUp('world');
    chmodSync(pair.key, 0o644);
    expect(webhookCertificateCheck(config, Date.now(), service)).toMatchObject([{ ok: false, detail: `webhook.key: ${pair.key} is readable by every user on this box` }]);
  });
});

describe('the webhook port over HTTPS: the keys that go with it', () => {
  const problems = (webhook: string): string[] => {
    try {
      parseConfig(`site: {id: x}\nvendor: {baseUrl: "https://x", apiKey: k-1234}\nwebhook: {channelSecret: s, ${webhook}}\n`, 'c.yaml', { env: {} });
      return [];
    } catch (err) {
      return [...(err as ConfigError).problems];
    }
  };

  it('serves TLS only on the webhook\'s own port, and needs both files', () => {
    expect(problems('cert: /etc/c.pem, key: /etc/k.pem')).toEqual([
      "webhook.cert: only with webhook.port (HTTPS is served on the webhook's own port; http.port stays plain HTTP)",
      "webhook.key: only with webhook.port (HTTPS is served on the webhook's own port; http.port stays plain HTTP)",
    ]);
    expect(problems('port: 8443, cert: /etc/c.pem')).toEqual(['webhook.key: required when webhook.cert is set']);
    expect(problems('port: 8443, key: /etc/k.pem')).toEqual(['webhook.cert: required when webhook.key is set']);
  });
});

describeWith(['mosquitto', 'openssl'], 'a signed webhook over HTTPS, end to end', () => {
  let rig: Rig;
  let sub: Subscriber;
  let pair: { cert: string; key: string };

  beforeAll(async () => {
    pair = makePair('rig', 30);
    rig = await startRig({ site: 'tls-port', sections: { webhook: { port: 0, cert: pair.cert, key: pair.key } } });
    sub = await Subscriber.connect(rig.broker.url, 'chair-agent/tls-port/transactions/#');
  }, 30_000);

  afterAll(async () => {
    await sub?.close();
    await rig?.close();
  });

  it('stores what the simulator sends to https:// and delivers it to the broker', async () => {
    const { logger } = memoryLogger();
    const sender = new WebhookSender({ url: `https://127.0.0.1:${rig.agent.webhookHttp.address().port}/vendor/webhook`, secret: TEST_SECRET }, systemClock, logger);
    const rec = vendorRecord({ Status: 'finished', PaymentMethod: 'qr' });
    sender.send(rec);
    await sender.idle();
    sender.stop();
    expect(sender.sent).toBe(1);
    const delivered = await sub.waitFor((m) => (JSON.parse(m.text) as { TransactionId?: string }).TransactionId === rec['TransactionId'], 'the record on MQTT');
    expect(delivered.topic).toBe(`chair-agent/tls-port/transactions/${String(rec['DeviceId'])}`);
  });

  it('answers a client that checks the certificate, and puts the expiry in the metrics on http.port', async () => {
    const body = JSON.stringify(vendorRecord());
    const r = await request(`https://127.0.0.1:${rig.agent.webhookHttp.address().port}/vendor/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-vendor-signature': signBody(body, TEST_SECRET) },
      body,
      dispatcher: new HttpsClient({ connect: { ca: readFileSync(pair.cert) } }),
    });
    expect(r.statusCode).toBe(200);
    await r.body.dump();
    const metrics = await (await fetch(`${rig.base}/metrics`)).text();
    const expires = Math.floor(Date.parse(new X509Certificate(readFileSync(pair.cert)).validTo) / 1000);
    expect(metrics).toContain(`chair_agent_webhook_certificate_expiry_timestamp_seconds ${expires}`);
  });

  it('says when the certificate expires in bridge/info, for a fleet watching its brokers', async () => {
    const info = await Subscriber.connect(rig.broker.url, 'chair-agent/tls-port/bridge/info');
    try {
      const m = await info.waitFor(() => true, 'bridge/info');
      const { webhookCertificate } = JSON.parse(m.text) as { webhookCertificate?: { expiresAt: string } };
      expect(Date.parse(webhookCertificate?.expiresAt ?? '')).toBe(Date.parse(new X509Certificate(readFileSync(pair.cert)).validTo));
    } finally {
      await info.close();
    }
  });
});
