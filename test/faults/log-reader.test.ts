import { spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, readlinkSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signBody } from '../../agent/http/sign.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { AgentProcess, track } from '../helpers/agent-process.js';
import { MAIN } from '../helpers/cli.js';
import { freePort } from '../helpers/ports.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { vendorRecord } from '../helpers/records.js';
import { Subscriber } from '../helpers/subscriber.js';
import { describeWith, itWith } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';

const SECRET = 'log-reader-secret';
let broker: TestBroker;
let sim: Simulator;

beforeAll(async () => {
  broker = await startBroker();
  sim = new Simulator({ apiKey: 'log-reader-key' });
  await sim.start();
});

afterAll(async () => {
  await sim.close();
  await broker.stop();
});

function configFor(site: string, dir: string, port: number, storage = join(dir, 'agent.db')): string {
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    `site: {id: ${site}}
vendor: {baseUrl: "${sim.url}", apiKey: log-reader-key}
webhook: {channelSecret: ${SECRET}}
transactions: {syncSchedule: "0 0 0 1 1 *"}
http: {host: 127.0.0.1, port: ${port}}
mqtt: {url: "${broker.url}"}
storage: {path: "${storage}"}
`,
  );
  return config;
}

async function sendWebhooks(pool: Pool, ids: string[]): Promise<number[]> {
  const statuses: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < ids.length) {
        const body = JSON.stringify(vendorRecord({ TransactionId: ids[next++] }));
        const res = await pool.request({ path: '/vendor/webhook', method: 'POST', headers: { 'content-type': 'application/json', 'x-vendor-signature': signBody(body, SECRET) }, body });
        await res.body.dump();
        statuses.push(res.statusCode);
      }
    }),
  );
  return statuses;
}

describeWith('mosquitto', 'a stdout that stops taking log lines', () => {
  it('keeps storing, answering and publishing while nobody reads its log, and then says how many lines it dropped', async () => {
    const config = configFor('logreader', mkdtempSync(join(tmpdir(), 'log-reader-')), 0);
    const sub = await Subscriber.connect(broker.url, 'chair-agent/logreader/transactions/#');
    // stdout is a socket, as journald's stream is under systemd.
    const agent = AgentProcess.start(['run', '--config', config]);
    const port = await agent.httpPort();
    await agent.waitForLog((l) => l.msg === 'connected to the broker', 'the broker connection');
    const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 16 });
    try {
      agent.child.stdout?.pause();
      // One info line per new record, about 200 bytes: 8,000 of them are far more than the
      // socket and the agent's 1 MiB queue hold.
      const ids = Array.from({ length: 8000 }, (_, i) => `STALL-${i}`);
      const statuses = await sendWebhooks(pool, ids);
      expect(statuses.filter((s) => s === 200)).toHaveLength(ids.length);
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
      await waitFor(() => new Set(sub.messages.map((m) => (JSON.parse(m.text) as { TransactionId: string }).TransactionId)).size === ids.length, () => `all ${ids.length} records published (${sub.messages.length} so far)`, 60_000);

      agent.child.stdout?.resume();
      // Once the reader has caught up, the count comes by itself; then the log goes on.
      const drop = await agent.waitForLog((l) => l.msg === 'log lines dropped: the log reader fell behind', 'the dropped-lines line');
      expect(await sendWebhooks(pool, ['STALL-AFTER'])).toEqual([200]);
      await agent.waitForLog((l) => l.msg === 'transaction received by webhook' && l['transactionId'] === 'STALL-AFTER', 'the line of the record after');
      expect(drop.level).toBe('warn');
      const dropped = drop['dropped'] as number;
      expect(dropped).toBeGreaterThan(0);
      const received = agent.lines.filter((l) => l.msg === 'transaction received by webhook').length;
      // Every record's line is either in the log or counted: at most the few other lines beside them.
      expect(received + dropped).toBeGreaterThanOrEqual(ids.length + 1);
      expect(received + dropped).toBeLessThan(ids.length + 1 + 20);
      // What was written is whole lines, each one JSON.
      const text = agent.raw.trimEnd().split('\n');
      expect(text.filter((l) => !l.startsWith('{') || !l.endsWith('}'))).toEqual([]);
      expect(agent.lines.length).toBe(text.length);
    } finally {
      await pool.close();
      await sub.close();
    }
    expect(await agent.signal('SIGTERM')).toBe(0);
  }, 120_000);

  it('serves, stores and stops as usual when every write to stdout fails (a file on a full disk)', async () => {
    const port = await freePort();
    const config = configFor('logfull', mkdtempSync(join(tmpdir(), 'log-full-')), port);
    const sub = await Subscriber.connect(broker.url, 'chair-agent/logfull/transactions/#');
    // /dev/full fails every write with ENOSPC, as a file does on a full disk.
    const full = openSync('/dev/full', 'w');
    const child = track(spawn(process.execPath, [MAIN, 'run', '--config', config], { stdio: ['ignore', full, 'pipe'] }));
    closeSync(full);
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const pool = new Pool(`http://127.0.0.1:${port}`);
    try {
      await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => null))?.status === 200, () => `/healthz answering (stderr: ${stderr.slice(-500)})`, 30_000);
      expect(await sendWebhooks(pool, ['FULL-1', 'FULL-2'])).toEqual([200, 200]);
      await waitFor(() => sub.messages.length === 2, 'both records published');
    } finally {
      await pool.close();
      await sub.close();
    }
    // Before: the first line's ENOSPC ended the process's event loop, and its exit then retried
    // the write every 100 ms, forever: no /healthz, and SIGTERM never ended it.
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(stderr).toBe('');
  }, 60_000);

  itWith('prlimit', 'writes its log file again once it has room, and says how many lines it could not write', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'log-room-'));
    const log = join(dir, 'agent.log');
    const port = await freePort();
    // The database in memory: the file-size limit below is then the log file's alone.
    const config = configFor('logroom', dir, port, ':memory:');
    // A log file that can take no more: an 8 KiB size limit (RLIMIT_FSIZE, set by util-linux's
    // prlimit) stands for a full disk, and truncating the file, as logrotate's copytruncate does,
    // for room made again. SIGXFSZ is ignored (the shell's trap lasts through the execs), so a write
    // past the limit fails with EFBIG instead of killing the process.
    const child = track(
      spawn('sh', ['-c', 'trap "" XFSZ; exec prlimit --fsize=8192 "$0" "$@" >>"$LOG"', process.execPath, MAIN, 'run', '--config', config], {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, LOG: log },
      }),
    );
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 4 });
    const size = (): number => statSync(log).size;
    try {
      await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => null)) !== null, () => `the agent answering (stderr: ${stderr.slice(-500)})`, 30_000);
      // About 170 bytes of log per record: 100 of them are more than the file can take.
      const first = Array.from({ length: 100 }, (_, i) => `ROOM-${i}`);
      expect((await sendWebhooks(pool, first)).filter((s) => s === 200)).toHaveLength(first.length);
      await waitFor(() => size() === 8192, () => `the log file at its limit (${size()} bytes)`);
      expect(await sendWebhooks(pool, ['ROOM-FULL'])).toEqual([200]);

      truncateSync(log, 0);
      // A new write stream is tried every few seconds: the next record's line lands in the file.
      await waitFor(
        async () => {
          expect(await sendWebhooks(pool, [`ROOM-AFTER-${Date.now()}`])).toEqual([200]);
          return readFileSync(log, 'utf8').includes('ROOM-AFTER-');
        },
        'a line written after the truncation',
        30_000,
      );
      const lines = readFileSync(log, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines[0]).toMatchObject({ level: 'warn', msg: 'log lines dropped: writing them failed (a full disk?); written again since' });
      expect(lines[0]?.['dropped']).toBeGreaterThan(0);
    } finally {
      await pool.close();
    }
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(stderr).toBe('');
  }, 90_000);
});

/** TCP ports the process listens on: its socket fds matched against the kernel's listening sockets. */
function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1] as string);
    } catch {
      // closed meanwhile
    }
  }
  const ports: number[] = [];
  for (const table of ['tcp', 'tcp6']) {
    for (const row of readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
      const f = row.trim().split(/\s+/);
      if (f[3] === '0A' && inodes.has(f[9] as string)) ports.push(parseInt((f[1] as string).split(':')[1] as string, 16));
    }
  }
  return ports;
}

/** The command with stdout on /dev/full, which fails every write with ENOSPC, as a file on a full disk does. */
function onFullDisk(args: string[]): { child: ReturnType<typeof spawn>; stderr: () => string; exited: Promise<number | null> } {
  const full = openSync('/dev/full', 'w');
  const child = track(spawn(process.execPath, [MAIN, ...args], { stdio: ['ignore', full, 'pipe'] }));
  closeSync(full);
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, stderr: () => stderr, exited };
}

describe('the other long-running commands on a stdout that fails', () => {
  // Before: they logged through pino's default destination, whose ENOSPC went uncaught: the
  // simulator never answered, and neither stopped on SIGTERM (their exit retried the write forever).
  it('simulate serves the vendor API and stops on SIGTERM', async () => {
    const port = await freePort();
    const sim = onFullDisk(['simulate', '--port', String(port), '--api-key', 'full-key']);
    await waitFor(
      async () => (await fetch(`http://127.0.0.1:${port}/api/chair/lists`, { headers: { Apikey: 'full-key' } }).catch(() => null))?.status === 200,
      () => `the simulator answering (stderr: ${sim.stderr().slice(-500)})`,
      30_000,
    );
    sim.child.kill('SIGTERM');
    expect(await sim.exited).toBe(0);
    expect(sim.stderr()).toBe('');
  }, 60_000);

  it('demo runs its agent, simulator and broker, and stops on SIGTERM', async () => {
    const demo = onFullDisk(['demo']);
    // Its addresses go to the stdout that fails: the agent is the one of its listeners with /healthz.
    const agentUp = async (): Promise<boolean> => {
      for (const p of listeningPorts(demo.child.pid as number)) {
        if ((await fetch(`http://127.0.0.1:${p}/healthz`).catch(() => null))?.status === 200) return true;
      }
      return false;
    };
    await waitFor(agentUp, () => `the demo's agent answering /healthz (stderr: ${demo.stderr().slice(-500)})`, 30_000);
    demo.child.kill('SIGTERM');
    expect(await demo.exited).toBe(0);
    expect(demo.stderr()).toBe('');
  }, 60_000);
});

