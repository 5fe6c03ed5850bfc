import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import mqtt from 'mqtt';
import { transactionPayload } from '../agent/delivery/transaction-payload.js';
import { Topics } from '../agent/mqtt/topics.js';
import { Simulator } from '../agent/simulator/simulator.js';
import { Outbox } from '../agent/store/outbox.js';
import type { TransactionRecord } from '../agent/vendor/vendor-api.js';
import { startAgent, writeAgentConfig } from './lib/agent-proc.js';
import { startBroker, type TestBroker } from './lib/broker.js';
import { freePort } from './lib/ports.js';
import { vendorFields } from './lib/records.js';
import { BENCH_DIR, sleep, spawnNode } from './lib/spawn.js';
import { paired, type Paired } from './lib/paired.js';
import { cpuMsBetween, cpuSnapshot } from './lib/proc.js';
import { slowFsyncEnv } from './lib/slow-fsync.js';

const OUTAGE_MS = 3_000;
const SITE = 'flush';

export interface FlushResult {
  records: number;
  runs: number;
  window: number;
  agentMs: number[];
  peerMs: number[];
  /** Broker back -> the agent's bridge/state online at the subscriber. */
  reconnectMs: number[];
  /** Agent throughput over the peer's, per round: 1.0 is as fast. */
  ratio: Paired;
  /** CPU time each spent from the broker's return to the last record, per round. */
  agentCpuMs: number[];
  peerCpuMs: number[];
  /** Agent CPU per record over the peer's, per round: 1.0 is as frugal. */
  cpuRatio: Paired;
  fsyncMs: number;
}

interface Run {
  ms: number;
  cpuMs: number;
}

function records(n: number, run: number): TransactionRecord[] {
  return Array.from({ length: n }, (_, i) => {
    const fields = vendorFields(`F${run}-${i}`, i, { Status: 'finished', Label: 'Massage Chair 1', DeviceId: `MC70${String(i % 16).padStart(2, '0')}` });
    return { fields, transactionId: fields['TransactionId'] as string, status: 'finished', deviceId: fields['DeviceId'] as string, transactionTime: '2026-11-22 14:00:00' };
  });
}

/** The instrument: a persistent QoS 1 subscriber that loses nothing while the broker is away. */
class Counter {
  private counts = new Map<string, number>();
  private waiters: { marker: string; n: number; resolve: (at: number) => void }[] = [];
  private onlineAt: number | null = null;
  private onlineWaiter: ((at: number) => void) | null = null;
  private constructor(readonly client: mqtt.MqttClient) {
    client.on('message', (topic, payload) => {
      if (topic.endsWith('/bridge/state')) {
        if (payload.toString().includes('online')) {
          this.onlineAt = performance.now();
          this.onlineWaiter?.(this.onlineAt);
        }
        return;
      }
      const text = payload.toString();
      const marker = text.slice(text.indexOf('"TransactionId":"') + 17, text.indexOf('-', text.indexOf('"TransactionId":"')));
      const n = (this.counts.get(marker) ?? 0) + 1;
      this.counts.set(marker, n);
      for (const w of [...this.waiters]) {
        if (w.marker === marker && n >= w.n) {
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve(performance.now());
        }
      }
    });
  }
  static async connect(url: string): Promise<Counter> {
    const client = await mqtt.connectAsync(url, { protocolVersion: 5, clean: false, clientId: `bench-flush-sub-${process.pid}`, reconnectPeriod: 20, properties: { sessionExpiryInterval: 3600 } });
    await client.subscribeAsync([`chair-agent/${SITE}/transactions/+`, `chair-agent/${SITE}/bridge/state`, 'peer/flush/#'], { qos: 1 });
    return new Counter(client);
  }
  /** When `n` records of the run with this marker have arrived. */
  all(marker: string, n: number): Promise<number> {
    if ((this.counts.get(marker) ?? 0) >= n) return Promise.resolve(performance.now());
    return new Promise((resolve) => this.waiters.push({ marker, n, resolve }));
  }
  resetOnline(): void {
    this.onlineAt = null;
  }
  online(): Promise<number> {
    if (this.onlineAt !== null) return Promise.resolve(this.onlineAt);
    return new Promise((resolve) => (this.onlineWaiter = resolve));
  }
  close(): Promise<void> {
    return this.client.endAsync(true);
  }
}

async function agentRun(broker: TestBroker, counter: Counter, sim: Simulator, dir: string, n: number, run: number, env: NodeJS.ProcessEnv): Promise<Run & { reconnect: number }> {
  const db = join(dir, `agent-${run}.db`);
  const outbox = new Outbox({ path: db });
  outbox.open();
  const recs = records(n, run);
  for (let i = 0; i < n; i += 5000) await outbox.storeDurably(recs.slice(i, i + 5000), 'poll', Date.now());
  outbox.close();
  const config = writeAgentConfig(
    dir,
    `site: {id: ${SITE}}
vendor: {baseUrl: "${sim.url}", apiKey: flush-key}
webhook: {enabled: false}
transactions: {syncSchedule: "0 0 0 1 1 *"}
http: {host: 127.0.0.1, port: ${await freePort()}}
mqtt: {url: "${broker.url}"}
storage: {path: ${db}}
log: {level: warn}
`,
  );
  await broker.stop();
  counter.resetOnline();
  const agent = startAgent(config, env);
  await sleep(OUTAGE_MS);
  const pid = agent.child.pid as number;
  const cpu0 = cpuSnapshot(pid);
  const t0 = performance.now();
  await broker.restart();
  const [end, online] = await Promise.all([counter.all(`F${run}`, n), counter.online()]);
  const cpuMs = cpuMsBetween(cpu0, cpuSnapshot(pid));
  await agent.stop();
  rmSync(db, { force: true });
  return { ms: end - t0, reconnect: online - t0, cpuMs };
}

/** The peer process was gone before the broker came back: that round is not a measurement. */
class PeerEnded extends Error {}

/** A peer round, made again once if its process ended before the broker came back (said on stderr). */
async function peerRound(broker: TestBroker, counter: Counter, dir: string, n: number, run: number): Promise<Run> {
  try {
    return await peerRun(broker, counter, dir, n, run);
  } catch (err) {
    if (!(err instanceof PeerEnded)) throw err;
    process.stderr.write(`${err.message}; that round is made again\n`);
    return await peerRun(broker, counter, dir, n, run + 1_000_000);
  }
}

async function peerRun(broker: TestBroker, counter: Counter, dir: string, n: number, run: number): Promise<Run> {
  const topics = new Topics('peer', 'flush');
  const file = join(dir, `peer-${run}.jsonl`);
  const now = Date.now();
  writeFileSync(
    file,
    records(n, run)
      .map((r, i) => JSON.stringify({ topic: topics.transaction(r.deviceId), payload: transactionPayload({ seq: i + 1, transactionId: r.transactionId, status: r.status, deviceId: r.deviceId, record: JSON.stringify(r.fields), source: 'poll', receivedAt: now, crc: null }, SITE, 'Asia/Bangkok') }))
      .join('\n'),
  );
  await broker.stop();
  const peer = spawnNode(join(BENCH_DIR, 'peers', 'tight-publisher.js'), [broker.url, file]);
  await sleep(OUTAGE_MS);
  if (peer.child.exitCode !== null || peer.child.signalCode !== null) {
    throw new PeerEnded(`the tight publisher ended during the outage (${peer.child.exitCode ?? peer.child.signalCode}): ${peer.output().trim().slice(0, 2000) || 'no output'}`);
  }
  const cpu0 = cpuSnapshot(peer.pid);
  const t0 = performance.now();
  await broker.restart();
  const end = await counter.all(`F${run}`, n);
  const cpuMs = cpuMsBetween(cpu0, cpuSnapshot(peer.pid));
  await peer.line((l) => l === 'done', 'done').catch(() => undefined);
  await peer.stop();
  return { ms: end - t0, cpuMs };
}

/**
 * The flush after a broker outage, end to end: N records buffered (the agent's in its outbox, the
 * peer's in memory), the broker stopped for 3 s, then back; from the moment it listens again to the
 * last record at a QoS 1 subscriber. Both reconnect by themselves (the peer every 100 ms). Runs
 * alternate which goes first; a warm-up round of each is not counted.
 */
export async function benchFlush(n: number, runs: number, fsyncMs = 0, shim?: string): Promise<FlushResult> {
  const env = shim ? slowFsyncEnv(shim, fsyncMs) : { ...process.env };
  const broker = await startBroker({ persistent: true });
  const sim = new Simulator({ apiKey: 'flush-key', chairs: 2 });
  await sim.start();
  const dir = mkdtempSync(join(tmpdir(), 'bench-flush-'));
  const counter = await Counter.connect(broker.url);
  const agentRuns: Run[] = [];
  const peerRuns: Run[] = [];
  const reconnectMs: number[] = [];
  try {
    await agentRun(broker, counter, sim, dir, Math.min(n, 2000), 1000, env);
    await peerRound(broker, counter, dir, Math.min(n, 2000), 1001);
    for (let run = 0; run < runs; run++) {
      const agentFirst = run % 2 === 0;
      if (!agentFirst) peerRuns.push(await peerRound(broker, counter, dir, n, 2 * run + 1));
      const a = await agentRun(broker, counter, sim, dir, n, 2 * run, env);
      agentRuns.push(a);
      reconnectMs.push(a.reconnect);
      if (agentFirst) peerRuns.push(await peerRound(broker, counter, dir, n, 2 * run + 1));
    }
  } finally {
    await counter.close();
    await sim.close();
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const agentMs = agentRuns.map((r) => r.ms);
  const peerMs = peerRuns.map((r) => r.ms);
  return {
    records: n,
    runs,
    window: 20,
    fsyncMs,
    agentMs: agentMs.map((x) => Math.round(x)),
    peerMs: peerMs.map((x) => Math.round(x)),
    reconnectMs: reconnectMs.map((x) => Math.round(x)),
    // Throughput is records over time: the peer's time over the agent's, round by round.
    ratio: paired(peerMs, agentMs),
    agentCpuMs: agentRuns.map((r) => Math.round(r.cpuMs)),
    peerCpuMs: peerRuns.map((r) => Math.round(r.cpuMs)),
    cpuRatio: paired(
      agentRuns.map((r) => r.cpuMs),
      peerRuns.map((r) => r.cpuMs),
    ),
  };
}

