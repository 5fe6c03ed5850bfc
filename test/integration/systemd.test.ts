import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Simulator } from '../../agent/simulator/simulator.js';
import { AgentProcess } from '../helpers/agent-process.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { ROOT } from '../helpers/cli.js';
import { freePort } from '../helpers/ports.js';
import { describeWith } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';

const UNIT = join(ROOT, 'systemd', 'chair-agent.service');

describeWith('systemd', 'the systemd unit', () => {
  it('passes systemd-analyze verify, as installed (ExecStart is the launcher in /opt/chair-agent)', () => {
    // A root with this machine's units and the installed launcher's path: the unit is checked as shipped.
    const root = mkdtempSync(join(tmpdir(), 'unit-root-'));
    mkdirSync(join(root, 'etc/systemd/system'), { recursive: true });
    mkdirSync(join(root, 'usr/lib/systemd'), { recursive: true });
    mkdirSync(join(root, 'opt/chair-agent/bin'), { recursive: true });
    cpSync('/usr/lib/systemd/system', join(root, 'usr/lib/systemd/system'), { recursive: true, verbatimSymlinks: true });
    writeFileSync(join(root, 'opt/chair-agent/bin/chair-agent'), '#!/bin/sh\n', { mode: 0o755 });
    cpSync(UNIT, join(root, 'etc/systemd/system/chair-agent.service'));
    const r = spawnSync('systemd-analyze', ['verify', `--root=${root}`, '/etc/systemd/system/chair-agent.service'], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr.split('\n').filter((l) => l.includes('chair-agent.service') && !/non-existent unit multi-user/.test(l))).toEqual([]);
  });

  it('is hardened to an exposure of 2.0 or lower', () => {
    const r = spawnSync('systemd-analyze', ['security', '--offline=yes', UNIT], { encoding: 'utf8' });
    const m = /Overall exposure level for chair-agent\.service: (\d+\.\d+)/.exec(r.stdout);
    expect(m, r.stdout + r.stderr).not.toBeNull();
    expect(Number(m?.[1])).toBeLessThanOrEqual(2.0);
  });

  it('restarts on failure, but not after a configuration error', () => {
    const unit = readFileSync(UNIT, 'utf8');
    expect(unit).toMatch(/^Type=notify$/m);
    expect(unit).toMatch(/^Restart=on-failure$/m);
    expect(unit).toMatch(/^RestartPreventExitStatus=78$/m);
    expect(unit).toMatch(/^WatchdogSec=\d+$/m);
    expect(unit).toMatch(/^StateDirectory=chair-agent$/m);
    for (const cred of ['vendor-api-key', 'webhook-secret', 'mqtt-password']) {
      expect(unit).toContain(`LoadCredential=${cred}:/etc/chair-agent/credentials/${cred}`);
    }
  });
});

describeWith(['systemd', 'python3'], 'sd_notify', () => {
  let broker: TestBroker;
  let sim: Simulator;
  let listener: ChildProcess;
  const messages: string[] = [];
  let socketPath: string;
  const waiters: (() => void)[] = [];

  beforeAll(async () => {
    broker = await startBroker();
    sim = new Simulator({ apiKey: 'notify-key' });
    await sim.start();
    socketPath = join(mkdtempSync(join(tmpdir(), 'notify-')), 'notify.sock');
    listener = spawn('python3', [join(ROOT, 'test/helpers/py/notify_listen.py'), socketPath], { stdio: ['ignore', 'pipe', 'inherit'] });
    let buffer = '';
    listener.stdout?.on('data', (d: Buffer) => {
      buffer += d.toString();
      const lines = buffer.split('\n');
      buffer = lines.pop() ?? '';
      messages.push(...lines);
      for (const w of waiters.splice(0)) w();
    });
    await waitFor(() => messages.includes('LISTENING'), 'the notify listener');
  });

  afterAll(async () => {
    listener.kill();
    await sim.close();
    await broker.stop();
  });

  it('says READY=1 once the HTTP listener is up, pings the watchdog, and says STOPPING=1 on SIGTERM', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'notify-agent-'));
    const port = await freePort();
    const config = join(dir, 'config.yaml');
    writeFileSync(
      config,
      `site: {id: notify}
vendor: {baseUrl: "${sim.url}", apiKey: notify-key}
webhook: {channelSecret: notify-secret}
http: {host: 127.0.0.1, port: ${port}}
mqtt: {url: "${broker.url}"}
storage: {path: ${join(dir, 'agent.db')}}
`,
    );
    // Whether the HTTP port accepted a connection at the moment READY=1 arrived.
    let listeningAtReady: boolean | null = null;
    const readyCheck = new Promise<void>((resolve) => {
      const check = (): void => {
        if (!messages.includes('READY=1')) {
          waiters.push(check);
          return;
        }
        const s = connect(port, '127.0.0.1');
        s.once('connect', () => {
          listeningAtReady = true;
          s.destroy();
          resolve();
        });
        s.once('error', () => {
          listeningAtReady = false;
          resolve();
        });
      };
      waiters.push(check);
    });
    const agent = AgentProcess.start(['run', '--config', config], { NOTIFY_SOCKET: socketPath, WATCHDOG_USEC: '400000' });
    await readyCheck;
    expect(listeningAtReady).toBe(true);
    const status = await waitFor(() => messages.find((m) => m.startsWith('STATUS=')), 'the STATUS line sent with READY=1');
    expect(status).toMatch(/^STATUS=(ok|degraded): /);
    await waitFor(() => messages.filter((m) => m === 'WATCHDOG=1').length >= 3, 'three watchdog pings');
    expect(await agent.signal('SIGTERM')).toBe(0);
    await waitFor(() => messages.includes('STOPPING=1'), 'STOPPING=1');
    expect(messages.indexOf('STOPPING=1')).toBeGreaterThan(messages.indexOf('READY=1'));
  });
});
