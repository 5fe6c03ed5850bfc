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
    mkdirSync(join(root, 'opt/chair-agent/lib'), { recursive: true });
    writeFileSync(join(root, 'opt/chair-agent/lib/crash-guard.sh'), '#!/bin/sh\n', { mode: 0o755 });
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

describe('the crash-loop guard (lib/crash-guard.sh, in place of the start rate limit)', () => {
  const GUARD = join(ROOT, 'scripts', 'pkg', 'crash-guard.sh');
  const guard = (log: string, mode: 'record' | 'check', env: Record<string, string> = {}) =>
    spawnSync('sh', [GUARD, mode], { encoding: 'utf8', env: { PATH: process.env['PATH'], CHAIR_AGENT_CRASH_LOG: log, ...env } });
  const crash = { SERVICE_RESULT: 'exit-code', EXIT_CODE: 'exited', EXIT_STATUS: '1' };

  it('lets an installer restart as often as they like: clean stops and config errors are not crashes', () => {
    const log = join(mkdtempSync(join(tmpdir(), 'crash-')), 'crashes');
    for (let i = 0; i < 20; i++) {
      expect(guard(log, 'check').status).toBe(0);
      // Alternately a bad config (exit 78) and a manual restart of a running agent (exit 0 on SIGTERM).
      guard(log, 'record', i % 2 === 0 ? { SERVICE_RESULT: 'exit-code', EXIT_CODE: 'exited', EXIT_STATUS: '78' } : { SERVICE_RESULT: 'success', EXIT_CODE: 'exited', EXIT_STATUS: '0' });
    }
    expect(guard(log, 'check').status).toBe(0);
  });

  it('stops a crash loop after 5 crashes in 5 minutes, and the next manual start runs', () => {
    const log = join(mkdtempSync(join(tmpdir(), 'crash-')), 'crashes');
    for (const result of [crash, { SERVICE_RESULT: 'signal', EXIT_CODE: 'killed', EXIT_STATUS: 'KILL' }, { SERVICE_RESULT: 'watchdog', EXIT_CODE: 'killed', EXIT_STATUS: 'ABRT' }, crash]) {
      guard(log, 'record', result);
      expect(guard(log, 'check').status).toBe(0);
    }
    guard(log, 'record', crash);
    const stopped = guard(log, 'check');
    expect(stopped.status).toBe(78);
    expect(stopped.stderr).toContain('crashed 5 times in the last 5 minutes');
    // The unit does not restart exit 78; ExecStopPost records it as no crash; a manual start runs.
    guard(log, 'record', { SERVICE_RESULT: 'exit-code', EXIT_CODE: 'exited', EXIT_STATUS: '78' });
    expect(guard(log, 'check').status).toBe(0);
  });

  it('forgets crashes older than 5 minutes', () => {
    const log = join(mkdtempSync(join(tmpdir(), 'crash-')), 'crashes');
    const old = Math.floor(Date.now() / 1000) - 301;
    writeFileSync(log, `${old}\n${old}\n${old}\n${old}\n`);
    guard(log, 'record', crash);
    expect(guard(log, 'check').status).toBe(0);
  });

  it('is what the unit runs: no start rate limit, the guard after every stop', () => {
    const unit = readFileSync(UNIT, 'utf8');
    expect(unit).toMatch(/^StartLimitIntervalSec=0$/m);
    expect(unit).toMatch(/^ExecStopPost=\/opt\/chair-agent\/lib\/crash-guard\.sh record$/m);
    expect(unit).toMatch(/^Environment=CHAIR_AGENT_CRASH_LOG=\/var\/lib\/chair-agent\/crashes$/m);
    expect(readFileSync(join(ROOT, 'scripts', 'pkg', 'launcher.sh'), 'utf8')).toContain('sh "$top/lib/crash-guard.sh" check || exit 78');
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
