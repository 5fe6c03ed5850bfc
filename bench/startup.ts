import { closeSync, copyFileSync, existsSync, fsyncSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import mqtt from 'mqtt';
import { Simulator } from '../agent/simulator/simulator.js';
import { Outbox } from '../agent/store/outbox.js';
import { startAgent, writeAgentConfig } from './lib/agent-proc.js';
import { startBroker } from './lib/broker.js';
import { BENCH_DIR, spawnNode } from './lib/spawn.js';
import { paired, type Paired } from './lib/paired.js';
import { median, round } from './lib/stats.js';

export interface StartupSide {
  runs: number[];
  median: number;
}

export interface StartupResult {
  chairs: number;
  /** Start-up time over the bare loop's, per round (lower is better). */
  fresh: { agent: StartupSide; bare: StartupSide; ratio: Paired };
  /** The agent on a database holding `bigRows` undelivered and as many expired records, against bare runs of its own rounds. */
  big: { rows: number; agent: StartupSide; bare: StartupSide; ratio: Paired };
}

/**
 * A database as a site would have it after a long outage and a long life: `rows` records waiting
 * for the broker and `rows` delivered ones past retention. Built once with SQL (the agent's own
 * schema, made by opening it), copied for each run since a run changes it.
 */
export function bigDatabase(path: string, rows: number, expired = true): void {
  const outbox = new Outbox({ path });
  outbox.open();
  outbox.close();
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  const longAgo = Date.now() - 400 * 86_400_000;
  const record = (status: string): string =>
    `'{"TransactionId":"B' || n || '","Status":"${status}","DeviceId":"MC70' || (n % 16) || '","DeviceCode":"C-1","Label":"Massage Chair","Price":"150.00","PaymentMethod":"qr","TransactionTime":"2025-10-01 10:00:00"}'`;
  const insert = (status: string, deliveredAt: string, offset: number): void => {
    db.exec(`WITH RECURSIVE c(n) AS (SELECT ${offset} UNION ALL SELECT n + 1 FROM c WHERE n < ${offset + rows - 1})
      INSERT INTO transactions (transaction_id, status, device_id, record, source, received_at, delivered_at)
      SELECT 'B' || n, '${status}', 'MC70' || (n % 16), ${record(status)}, 'webhook', ${longAgo}, ${deliveredAt} FROM c`);
  };
  if (expired) insert('finished', String(longAgo), 0); // delivered long ago: expired
  insert('playing', 'NULL', rows); // never delivered
  db.exec(`UPDATE counters SET value = ${rows} WHERE name = 'pending'; UPDATE counters SET value = ${expired ? rows : 0} WHERE name = 'delivered'`);
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
  syncFile(path);
}

/**
 * Made with synchronous=OFF, the file is still in the page cache, not on disk: the agent's first
 * checkpoint would pay for writing all of it. A site's database has always been on disk.
 */
export function syncFile(path: string): void {
  const fd = openSync(path, 'r+');
  fsyncSync(fd);
  closeSync(fd);
}

async function firstChairState(brokerUrl: string, filter: string, spawnIt: () => { stop(): Promise<void> }): Promise<number> {
  const sub = await mqtt.connectAsync(brokerUrl, { clean: true });
  await sub.subscribeAsync(filter);
  const first = new Promise<void>((resolve) => sub.once('message', () => resolve()));
  const t0 = performance.now();
  const proc = spawnIt();
  await first;
  const ms = performance.now() - t0;
  await proc.stop();
  // Retained states of the previous run must not count for the next: clear them.
  await sub.endAsync();
  return ms;
}

const side = (runs: number[]): StartupSide => ({ runs: runs.map((t) => Math.round(t)), median: round(median(runs), 0) });

/**
 * From spawning the process to the first retained chair state at a subscriber: the agent
 * (`chair-agent run`, a separate process, as systemd starts it) against the bare poll-and-publish
 * loop (bench/peers/bare-poller.ts), alternating, each run on a site id never used before so no
 * retained message is already there. Then the agent on a copy of a database with 1M
 * undelivered and 1M expired records, alternating with bare runs of its own rounds.
 *
 * Rounds: a start-up is a few hundred ms, and one round's ratio moves by a third on this kind of
 * VM (1.05-1.56 within one run of 7): with 7 rounds the median moved from 1.13 to 1.37 between two
 * runs with no change. More rounds cost seconds; the big database's rounds each copy and sync it.
 */
export async function benchStartup(runs = 15, chairs = 16, bigRows = 1_000_000, bigRounds = 9): Promise<StartupResult> {
  const broker = await startBroker();
  const sim = new Simulator({ apiKey: 'start-key', chairs });
  await sim.start();
  const dir = mkdtempSync(join(tmpdir(), 'bench-start-'));
  const agentRuns: number[] = [];
  const bareRuns: number[] = [];
  const bigRuns: number[] = [];
  const bigBareRuns: number[] = [];
  let site = 0;
  const agentRun = async (db: string | null): Promise<number> => {
    const id = `start${site++}`;
    const path = join(dir, `${id}.db`);
    if (db) {
      copyFileSync(db, path);
      syncFile(path);
    }
    const config = writeAgentConfig(
      dir,
      `site: {id: ${id}}
vendor: {baseUrl: "${sim.url}", apiKey: start-key}
webhook: {channelSecret: start-secret}
http: {host: 127.0.0.1, port: 0}
mqtt: {url: "${broker.url}"}
storage: {path: ${path}}
`,
    );
    const ms = await firstChairState(broker.url, `chair-agent/${id}/chairs/+`, () => startAgent(config));
    for (const f of [path, `${path}-wal`, `${path}-shm`]) if (existsSync(f)) rmSync(f);
    return ms;
  };
  const bareRun = (): Promise<number> => {
    const id = `bare${site++}`;
    return firstChairState(broker.url, `${id}/chairs/+`, () => spawnNode(join(BENCH_DIR, 'peers', 'bare-poller.js'), [sim.url, 'start-key', broker.url, '1', id]));
  };
  try {
    await agentRun(null); // warm the page cache for both
    await bareRun();
    for (let i = 0; i < runs; i++) {
      if (i % 2 === 0) {
        agentRuns.push(await agentRun(null));
        bareRuns.push(await bareRun());
      } else {
        bareRuns.push(await bareRun());
        agentRuns.push(await agentRun(null));
      }
    }
    const big = join(dir, 'big.db');
    bigDatabase(big, bigRows);
    await agentRun(big);
    for (let i = 0; i < bigRounds; i++) {
      if (i % 2 === 0) {
        bigRuns.push(await agentRun(big));
        bigBareRuns.push(await bareRun());
      } else {
        bigBareRuns.push(await bareRun());
        bigRuns.push(await agentRun(big));
      }
    }
  } finally {
    await sim.close();
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const a = side(agentRuns);
  const b = side(bareRuns);
  const g = side(bigRuns);
  return {
    chairs,
    fresh: { agent: a, bare: b, ratio: paired(agentRuns, bareRuns) },
    big: { rows: bigRows, agent: g, bare: side(bigBareRuns), ratio: paired(bigRuns, bigBareRuns) },
  };
}
