import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { signBody } from '../../agent/http/sign.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { AgentProcess } from '../helpers/agent-process.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { runCli } from '../helpers/cli.js';
import { freePort } from '../helpers/ports.js';
import { vendorRecord } from '../helpers/records.js';
import { Subscriber } from '../helpers/subscriber.js';
import { waitFor } from '../helpers/wait.js';
import { describeWith } from '../helpers/tools.js';

const KEY = 'kill-key-0001';
const SECRET = 'kill-secret-0002';
/** Each round starts a real agent (about a second under load): 12 keep the whole test well inside its budget on a busy 2-core machine. */
const KILLS = 12;

let broker: TestBroker;
let sim: Simulator;
let dir: string;

beforeAll(async () => {
  broker = await startBroker();
  sim = new Simulator({ apiKey: KEY, chairs: 6, minuteMs: 100 }); // a 5-minute session lasts 0.5 s
  await sim.start();
  dir = mkdtempSync(join(tmpdir(), 'kill-'));
});

afterAll(async () => {
  await sim.close();
  await broker.stop();
});

const key = (r: Record<string, unknown>): string => `${String(r['TransactionId'])}/${String(r['Status'])}`;

describeWith('mosquitto', 'kill -9 in a loop', () => {
  it(`loses nothing that was acknowledged across ${KILLS} kills while webhooks, syncs and the publisher run`, async () => {
    const port = await freePort();
    const dbPath = join(dir, 'agent.db');
    const configPath = join(dir, 'config.yaml');
    writeFileSync(
      configPath,
      `site: {id: kill}
vendor: {baseUrl: "${sim.url}", apiKey: ${KEY}, pollSeconds: 0.5, requestTimeoutSeconds: 2}
transactions: {syncSchedule: "* * * * * *", pageSize: 100, lookbackHours: 1}
webhook: {channelSecret: ${SECRET}}
http: {host: 127.0.0.1, port: ${port}}
mqtt: {url: "${broker.url}", reconnectSeconds: 0.2}
storage: {path: ${dbPath}}
gpio: {driver: sim}
log: {level: warn}
`,
    );
    const sub = await Subscriber.connect(broker.url, 'chair-agent/kill/transactions/+');
    const acknowledged = new Map<string, Record<string, unknown>>();
    const url = `http://127.0.0.1:${port}/vendor/webhook`;

    const fireWebhooks = (until: { stop: boolean }): Promise<void> =>
      (async () => {
        while (!until.stop) {
          const rec = vendorRecord({ DeviceId: `MC700${1 + Math.floor(Math.random() * 6)}` });
          const body = JSON.stringify(rec);
          try {
            const res = await fetch(url, { method: 'POST', headers: { 'x-vendor-signature': signBody(body, SECRET) }, body });
            if (res.status === 200) acknowledged.set(key(rec), rec);
            await res.body?.cancel();
          } catch {
            // the agent died mid-request: no 200, no promise made
          }
          if (Math.random() < 0.3) sim.paidUse(undefined, 5);
        }
      })();

    for (let i = 0; i < KILLS; i++) {
      const agent = AgentProcess.start(['run', '--config', configPath]);
      await waitFor(() => fetch(`http://127.0.0.1:${port}/healthz`).then(() => true, () => false), `agent ${i} listening`);
      const until = { stop: false };
      const firing = [fireWebhooks(until), fireWebhooks(until)];
      await new Promise((r) => setTimeout(r, 150 + Math.random() * 900)); // let it run a random while, then pull the plug
      agent.child.kill('SIGKILL');
      expect(await agent.exited).toBeNull();
      until.stop = true;
      await Promise.all(firing);
    }

    // Every session at the simulator ends, then one agent runs until everything is out.
    // A session's record turns "finished" on a timer that can fire a little after the chair stops:
    // the vendor's final word on every transaction is what must arrive.
    await waitFor(
      () => [...sim.model.chairs.values()].every((c) => !sim.model.isRunning(c)) && sim.model.transactions.every((t) => t.record['Status'] === 'finished'),
      'sessions to end and their records to say so',
    );
    const vendorFinished = sim.model.transactions.map((t) => key(t.record));
    const final = AgentProcess.start(['run', '--config', configPath]);
    const received = (): Set<string> => new Set(sub.messages.map((m) => key(JSON.parse(m.text) as Record<string, unknown>)));
    const missing = (): { acknowledged: string[]; vendor: string[] } => {
      const got = received();
      return { acknowledged: [...acknowledged.keys()].filter((k) => !got.has(k)), vendor: vendorFinished.filter((k) => !got.has(k)) };
    };
    await waitFor(
      () => {
        const m = missing();
        return m.acknowledged.length + m.vendor.length === 0;
      },
      () => `every acknowledged and every vendor record at the subscriber; missing ${JSON.stringify(missing()).slice(0, 2000)}\n${(final.raw + final.stderr).slice(-3000)}`,
      60_000,
    );
    const backlog = async (): Promise<{ pending: number }> => {
      const r = await runCli(['outbox', '--json', '--config', configPath]);
      return JSON.parse(r.stdout) as { pending: number };
    };
    await waitFor(async () => (await backlog()).pending === 0, 'an empty backlog');
    expect(await final.signal('SIGTERM')).toBe(0);

    const db = new Database(dbPath, { readonly: true });
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    const rows = db.prepare('SELECT seq, transaction_id AS id, status, device_id AS device FROM transactions ORDER BY seq').all() as {
      seq: number;
      id: string;
      status: string;
      device: string;
    }[];
    db.close();
    // Everything stored was delivered, and per chair in the order the agent learned of it.
    const got = received();
    expect(rows.filter((r) => !got.has(`${r.id}/${r.status}`))).toEqual([]);
    const firstSeen = new Map<string, number>();
    sub.messages.forEach((m, i) => {
      const k = key(JSON.parse(m.text) as Record<string, unknown>);
      if (!firstSeen.has(k)) firstSeen.set(k, i);
    });
    for (const device of new Set(rows.map((r) => r.device))) {
      const order = rows.filter((r) => r.device === device).map((r) => firstSeen.get(`${r.id}/${r.status}`) as number);
      expect(order).toEqual([...order].sort((a, b) => a - b));
    }
    expect(acknowledged.size).toBeGreaterThan(KILLS);
    expect(vendorFinished.length).toBeGreaterThan(KILLS);
    await sub.close();
  }, 180_000);
});
