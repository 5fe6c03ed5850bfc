import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitForPort } from './ports.js';

export interface TestBroker {
  readonly port: number;
  readonly url: string;
  readonly kind: 'mosquitto' | 'aedes';
  /** MQTT 5 works (mosquitto); aedes speaks 3.1.1 only. */
  readonly mqtt5: boolean;
  /** Stops it the way a crash would (SIGKILL for mosquitto). */
  kill(): Promise<void>;
  /** Starts it again on the same port. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** Mosquittos this process started and has not stopped yet. */
const running = new Set<ChildProcess>();
/** Their directories (config, persistence): kept across a stop and restart, removed with the leftovers. */
const dirs = new Set<string>();

/**
 * Kills every Mosquitto this process started and left running (a test that failed half-way),
 * and removes the directories of all it started.
 */
export function killLeftoverBrokers(): void {
  for (const c of running) c.kill('SIGKILL');
  running.clear();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  dirs.clear();
}

export function mosquittoPath(): string | null {
  const wanted = process.env['CHAIR_AGENT_TEST_MOSQUITTO'];
  // A developer's way to run the suite as a machine without Mosquitto would.
  if (wanted === 'none') return null;
  // Another Mosquitto than the machine's: CI runs the suite against 2.1 so (.ci/mosquitto-2.1).
  // One that does not run fails the run rather than skipping every test that needs it.
  if (wanted) {
    const r = spawnSync(wanted, ['-h'], { encoding: 'utf8' });
    if (!/mosquitto version/.test(`${r.stdout}${r.stderr}`)) throw new Error(`CHAIR_AGENT_TEST_MOSQUITTO=${wanted} does not run Mosquitto: ${r.error?.message ?? r.stderr}`);
    return wanted;
  }
  for (const p of ['/usr/sbin/mosquitto', '/usr/local/sbin/mosquitto', '/usr/bin/mosquitto']) {
    const r = spawnSync(p, ['-h'], { stdio: 'ignore' });
    if (r.error === undefined) return p;
  }
  return null;
}

export interface BrokerOptions {
  /** Mosquitto's set_tcp_nodelay: PUBACKs are not held back by Nagle's algorithm. */
  tcpNoDelay?: boolean;
  /** More mosquitto.conf lines (message_size_limit, acl_file...); Mosquitto only. */
  extra?: string;
  /** Keep sessions across a restart (a persistent subscriber's queue survives the broker's outage). */
  persistent?: boolean;
  /** The listener section in place of a plain anonymous one (TLS, certificates, ACL); Mosquitto only. */
  listener?: (port: number) => string;
}

/** A real broker on a free loopback port: Mosquitto when installed, else aedes in-process. */
export async function startBroker(options: BrokerOptions = {}): Promise<TestBroker> {
  const port = await freePort();
  const bin = mosquittoPath();
  if (!bin && options.listener) throw new Error('this broker needs Mosquitto (TLS, ACLs or bridges): apt-get install mosquitto');
  return bin ? startMosquitto(bin, port, options) : startAedes(port);
}

async function startMosquitto(bin: string, port: number, options: BrokerOptions): Promise<TestBroker> {
  const dir = mkdtempSync(join(tmpdir(), 'mosq-'));
  dirs.add(dir);
  chmodSync(dir, 0o777); // Mosquitto started as root writes its persistence file as the mosquitto user
  const conf = join(dir, 'mosquitto.conf');
  writeFileSync(
    conf,
    `${options.listener ? options.listener(port) : `listener ${port} 127.0.0.1\nallow_anonymous true`}\n${options.persistent ? `persistence true\npersistence_location ${dir}/\nautosave_interval 0\n` : 'persistence false\n'}max_queued_messages 10000000\n${options.tcpNoDelay ? 'set_tcp_nodelay true\n' : ''}${options.extra ?? ''}`,
  );
  let child: ChildProcess | null = null;
  const launch = async (): Promise<void> => {
    const c = spawn(bin, ['-c', conf], { stdio: 'ignore' });
    child = c;
    running.add(c);
    c.once('exit', () => running.delete(c));
    await waitForPort(port);
  };
  const terminate = async (signal: NodeJS.Signals): Promise<void> => {
    const c = child as ChildProcess | null;
    child = null;
    if (!c || c.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      // A Mosquitto busy in a bridge's reconnect loop can ignore SIGTERM: it must not outlive us.
      const force = setTimeout(() => c.kill('SIGKILL'), 3_000);
      c.once('exit', () => {
        clearTimeout(force);
        resolve();
      });
      c.kill(signal);
    });
  };
  await launch();
  return {
    port,
    url: `mqtt://127.0.0.1:${port}`,
    kind: 'mosquitto',
    mqtt5: true,
    kill: () => terminate('SIGKILL'),
    restart: launch,
    stop: () => terminate('SIGTERM'),
  };
}

async function startAedes(port: number): Promise<TestBroker> {
  const { Aedes } = (await import('aedes')) as unknown as {
    Aedes: { createBroker(): Promise<{ handle: (s: Socket) => void; close(cb: () => void): void }> };
  };
  let server: Server | null = null;
  const sockets = new Set<Socket>();
  let broker: { handle: (s: Socket) => void; close(cb: () => void): void } | null = null;
  const launch = async (): Promise<void> => {
    broker = await Aedes.createBroker();
    const b = broker;
    server = createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      b.handle(s);
    });
    await new Promise<void>((resolve) => server?.listen(port, '127.0.0.1', () => resolve()));
  };
  const shut = async (): Promise<void> => {
    const s = server;
    server = null;
    for (const sock of sockets) sock.destroy();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
    const b = broker;
    broker = null;
    if (b) await new Promise<void>((resolve) => b.close(() => resolve()));
  };
  await launch();
  return { port, url: `mqtt://127.0.0.1:${port}`, kind: 'aedes', mqtt5: false, kill: shut, restart: launch, stop: shut };
}
