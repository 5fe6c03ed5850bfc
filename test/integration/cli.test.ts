import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Simulator } from '../../agent/simulator/simulator.js';
import { AgentProcess } from '../helpers/agent-process.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { MAIN, ROOT, runCli } from '../helpers/cli.js';
import { Subscriber } from '../helpers/subscriber.js';
import { itWith, oldNode } from '../helpers/tools.js';

const KEY = 'cli-api-key-31337';
const SECRET = 'cli-webhook-secret-271828';
let broker: TestBroker;
let sim: Simulator;
let dir: string;

function writeConfig(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, body);
  return path;
}

function goodConfig(site: string): string {
  return `site: {id: ${site}}
vendor: {baseUrl: "${sim.url}", pollSeconds: 0.5}
http: {host: 127.0.0.1, port: 0}
mqtt: {url: "${broker.url}"}
storage: {path: ${join(dir, `${site}.db`)}}
gpio: {driver: sim}
`;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cli-'));
  broker = await startBroker();
  sim = new Simulator({ apiKey: KEY });
  await sim.start();
});

afterAll(async () => {
  await sim.close();
  await broker.stop();
});

describe('the command line', () => {
  it('check prints the resolved config with secrets masked and exits 0', async () => {
    const path = writeConfig('ok.yaml', goodConfig('check-ok'));
    const r = await runCli(['check', '--config', path], { CHAIR_AGENT_VENDOR_API_KEY: KEY, CHAIR_AGENT_WEBHOOK_SECRET: SECRET });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('pollSeconds: 0.5');
    expect(r.stdout).toContain('apiKey: "******** (env CHAIR_AGENT_VENDOR_API_KEY)"');
    expect(r.stdout + r.stderr).not.toContain(KEY);
    expect(r.stdout + r.stderr).not.toContain(SECRET);
  });

  it('check and run exit 78 naming every bad key', async () => {
    const path = writeConfig('bad.yaml', `site: {id: x}\nvendor: {baseUrl: "${sim.url}", apiKey: k, polSeconds: 1}\nhttp: {port: web}\n`);
    for (const verb of ['check', 'run']) {
      const r = await runCli([verb, '--config', path], { CHAIR_AGENT_WEBHOOK_SECRET: SECRET });
      expect(r.code).toBe(78);
      expect(r.stderr).toContain('vendor.polSeconds: unknown key');
      expect(r.stderr).toContain('http.port: expected a number, got text "web"');
    }
  });

  it('finds the config through CHAIR_AGENT_CONFIG', async () => {
    const path = writeConfig('env.yaml', goodConfig('by-env'));
    const r = await runCli(['check'], { CHAIR_AGENT_CONFIG: path, CHAIR_AGENT_VENDOR_API_KEY: KEY, CHAIR_AGENT_WEBHOOK_SECRET: SECRET });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`# ${path}: valid`);
  });

  it('reads secrets from systemd credentials', async () => {
    const creds = mkdtempSync(join(tmpdir(), 'creds-'));
    writeFileSync(join(creds, 'vendor-api-key'), `${KEY}\n`);
    writeFileSync(join(creds, 'webhook-secret'), SECRET);
    const path = writeConfig('creds.yaml', goodConfig('creds'));
    const r = await runCli(['check', '--config', path], { CREDENTIALS_DIRECTORY: creds });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('(credential vendor-api-key)');
  });

  itWith('a Node.js older than 22', 'started by an older Node.js, it runs on the checkout\'s pinned runtime, exit status and all', () => {
    const old = oldNode() as string;
    const r = spawnSync(old, [MAIN, 'version'], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
    expect(spawnSync(old, [MAIN, 'frobnicate'], { encoding: 'utf8' }).status).toBe(1);
  });

  itWith('a Node.js older than 22', 'started by an older Node.js with no pinned runtime beside it, says what it needs and what to type', () => {
    const old = oldNode() as string;
    const copy = mkdtempSync(join(tmpdir(), 'no-runtime-'));
    cpSync(join(ROOT, 'dist', 'agent'), join(copy, 'dist', 'agent'), { recursive: true });
    cpSync(join(ROOT, 'package.json'), join(copy, 'package.json'));
    const r = spawnSync(old, [join(copy, 'dist', 'agent', 'main.js'), 'version'], { encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^chair-agent: needs Node\.js 22\.0 or newer; this is \d+\./);
    expect(r.stderr).toContain('npx chair-agent');
    expect(r.stderr).not.toMatch(/SyntaxError/);
  });

  it('rejects an unknown command or option with exit 1 and the usage', async () => {
    const r = await runCli(['frobnicate']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('unknown command "frobnicate"');
    const o = await runCli(['check', '--colour']);
    expect(o.code).toBe(1);
    expect(o.stderr).toContain("Unknown option '--colour'");
  });

  itWith('mosquitto', 'run serves health and metrics, logs JSON without secrets, and stops on SIGTERM with exit 0', async () => {
    const path = writeConfig('run.yaml', goodConfig('run'));
    const sub = await Subscriber.connect(broker.url, 'chair-agent/run/bridge/state');
    const agent = AgentProcess.start(['run', '--config', path], { CHAIR_AGENT_VENDOR_API_KEY: KEY, CHAIR_AGENT_WEBHOOK_SECRET: SECRET });
    const port = await agent.httpPort();
    await agent.waitForLog((l) => l.msg === 'vendor API reachable', 'first poll');
    await sub.waitFor((m) => m.text.includes('online'), 'online');

    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    const body = (await health.json()) as { status: string; checks: Record<string, { ok: boolean }> };
    expect(Object.keys(body.checks).sort()).toEqual(['broker', 'clock', 'database', 'gpio', 'vendor']);
    expect(body.checks['vendor']?.ok).toBe(true);
    expect(body.checks['broker']?.ok).toBe(true);

    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toMatch(/chair_agent_vendor_requests_total\{endpoint="lists",outcome="200"\} \d+/);
    expect(metrics).toContain('chair_agent_broker_connected 1');
    expect(metrics).toMatch(/chair_agent_chair_online\{device_id="MC7001"\} 1/);

    const before = sub.mark();
    const code = await agent.signal('SIGTERM');
    expect(code).toBe(0);
    await sub.waitFor((m) => m.text.includes('offline'), 'offline', before);
    expect(agent.lines.some((l) => l.msg === 'stopped')).toBe(true);
    expect(agent.raw).not.toContain(KEY);
    expect(agent.raw).not.toContain(SECRET);
    await sub.close();
  });

  itWith('mosquitto', 'start starts a chair through the button path and prints the outcome', async () => {
    const path = writeConfig('start.yaml', goodConfig('start').replace('storage:', 'start: {confirmIntervalSeconds: 0.2}\nstorage:'));
    const env = { CHAIR_AGENT_VENDOR_API_KEY: KEY, CHAIR_AGENT_WEBHOOK_SECRET: SECRET };
    const before = sim.requests.control;
    const ok = await runCli(['start', 'MC7004', '--minutes', '3', '--config', path], env);
    expect(ok).toMatchObject({ code: 0, stdout: 'MC7004: started for 3 minute(s); the chair reports running\n' });
    expect(sim.model.transactions.at(-1)?.record).toMatchObject({ DeviceId: 'MC7004', PlayTime: '3' });
    const busy = await runCli(['start', 'MC7004', '--json', '--config', path], env);
    expect(busy.code).toBe(1);
    expect(JSON.parse(busy.stdout)).toEqual({ status: 'error', deviceId: 'MC7004', error: 'chair_busy', message: 'the chair is running' });
    const unknown = await runCli(['start', 'NOPE', '--config', path], env);
    expect(unknown).toMatchObject({ code: 1, stdout: 'NOPE: not started: unknown_chair (no such chair at this site)\n' });
    expect(sim.requests.control).toBe(before + 1);
    const bad = await runCli(['start', 'MC7003', '--minutes', '999', '--config', path], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--minutes must be a whole number from 1 to 60');
    sim.model.chairs.get('MC7004')!.sessionEndsAt = null;
  });

  it("run keeps V8's compiled code in systemd's CacheDirectory, the config worker's too, and a second start writes none", async () => {
    const cache = mkdtempSync(join(tmpdir(), 'compile-cache-'));
    const path = writeConfig('cache.yaml', goodConfig('cache'));
    const startAndStop = async (): Promise<void> => {
      const agent = AgentProcess.start(['run', '--config', path], { CHAIR_AGENT_VENDOR_API_KEY: KEY, CHAIR_AGENT_WEBHOOK_SECRET: SECRET, CACHE_DIRECTORY: cache });
      await agent.waitForLog((l) => l.msg === 'vendor API reachable', 'first poll');
      expect(await agent.signal('SIGTERM')).toBe(0);
    };
    const files = (): Map<string, string> => {
      const versions = readdirSync(cache);
      expect(versions).toHaveLength(1);
      expect(versions[0]).toMatch(/^v\d+\.\d+\.\d+-/);
      const dir = join(cache, versions[0] as string);
      const entries = readdirSync(dir, { withFileTypes: true });
      // One directory per Node version, holding both threads' code: none nested in it.
      expect(entries.filter((e) => !e.isFile()).map((e) => e.name)).toEqual([]);
      return new Map(entries.map((e) => [e.name, `${statSync(join(dir, e.name)).size}@${statSync(join(dir, e.name)).mtimeMs}`]));
    };
    await startAndStop();
    const first = files();
    expect(first.size).toBeGreaterThan(0);
    await startAndStop();
    expect(files()).toEqual(first);
  });

  it('run exits 1 with a clear message when its port is taken', async () => {
    const first = AgentProcess.start(['run', '--config', writeConfig('p1.yaml', goodConfig('port-a'))], {
      CHAIR_AGENT_VENDOR_API_KEY: KEY,
      CHAIR_AGENT_WEBHOOK_SECRET: SECRET,
    });
    const port = await first.httpPort();
    const clash = writeConfig('p2.yaml', goodConfig('port-b').replace('port: 0', `port: ${port}`));
    const second = AgentProcess.start(['run', '--config', clash], { CHAIR_AGENT_VENDOR_API_KEY: KEY, CHAIR_AGENT_WEBHOOK_SECRET: SECRET });
    expect(await second.exited).toBe(1);
    expect(second.lines.find((l) => l.level === 'fatal')?.['err']).toMatch(/the port is in use/);
    expect(await first.signal('SIGINT')).toBe(0);
  });
});
