import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt from 'mqtt';
import { Simulator } from '../agent/simulator/simulator.js';
import { startAgent, writeAgentConfig } from './lib/agent-proc.js';
import { startBroker } from './lib/broker.js';
import { freePort } from './lib/ports.js';
import { sleep } from './lib/spawn.js';
import { round } from './lib/stats.js';

export interface TrafficClass {
  messages: number;
  bytes: number;
}

export interface SiteTraffic {
  sessions: number;
  /** Per completed session: transaction records; chair-state changes, bridge/info updates and the day's figures (B/summary, the chair's day). */
  perSession: { transactions: TrafficClass; other: TrafficClass };
  /** One state message of a running chair (its remaining time moves at every poll). */
  runningStateBytes: number;
  /** The busy-site hour composed from the profile below. */
  profile: { chairs: number; busyShare: number; sessionMinutes: number; pollSeconds: number };
  perHour: { messages: number; bytes: number };
}

/** Bytes of an MQTT PUBLISH as the broker carries it: fixed header, topic, packet id, payload. */
const wire = (topic: string, payload: Buffer): number => 2 + 2 + Buffer.byteLength(topic) + 2 + payload.length + (payload.length > 125 ? 2 : 0);

/**
 * What one site sends its broker, measured on the agent: `sessions` paid sessions run against the
 * simulator (sped up: a minute lasts 100 ms, webhooks on), everything the agent publishes counted
 * at a subscriber. The busy hour is then composed from a stated profile: 16 chairs busy half the
 * time with 5-minute sessions, and the default 5 s poll, during which a running chair's state is
 * republished at every poll (its remaining time changed).
 */
export async function benchSiteTraffic(sessions = 48): Promise<SiteTraffic> {
  const broker = await startBroker();
  const port = await freePort();
  const sim = new Simulator({ apiKey: 'traffic-key', chairs: 16, minuteMs: 100, webhook: { url: `http://127.0.0.1:${port}/vendor/webhook`, secret: 'traffic-secret' } });
  await sim.start();
  const dir = mkdtempSync(join(tmpdir(), 'bench-traffic-'));
  const config = writeAgentConfig(
    dir,
    `site: {id: busy}
vendor: {baseUrl: "${sim.url}", apiKey: traffic-key, pollSeconds: 0.2}
webhook: {channelSecret: traffic-secret}
http: {host: 127.0.0.1, port: ${port}}
mqtt: {url: "${broker.url}"}
storage: {path: ${join(dir, 'agent.db')}}
log: {level: warn}
`,
  );
  const counts = { transactions: { messages: 0, bytes: 0 }, running: { messages: 0, bytes: 0 }, other: { messages: 0, bytes: 0 } };
  const sub = await mqtt.connectAsync(broker.url);
  const agent = startAgent(config);
  try {
    await sub.subscribeAsync('chair-agent/busy/#', { qos: 1 });
    await sleep(2000); // the start-up publishes (retained states, info) are not a session's
    sub.on('message', (topic, payload) => {
      const bytes = wire(topic, payload);
      const cls = topic.includes('/transactions/') ? counts.transactions : /\/chairs\/[^/]+$/.test(topic) && payload.includes('"running":true') ? counts.running : counts.other;
      cls.messages += 1;
      cls.bytes += bytes;
    });
    let started = 0;
    while (started < sessions) {
      if (sim.paidUse(undefined, 5).ok) started++;
      else await sleep(50);
    }
    await sleep(1500); // the last sessions end and their records are out
  } finally {
    await agent.stop();
    await sub.endAsync();
    await sim.close();
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const profile = { chairs: 16, busyShare: 0.5, sessionMinutes: 5, pollSeconds: 5 };
  const sessionsPerHour = (profile.chairs * profile.busyShare * 60) / profile.sessionMinutes;
  const runningStateBytes = counts.running.messages ? Math.round(counts.running.bytes / counts.running.messages) : 0;
  const runningPerHour = profile.chairs * profile.busyShare * (3600 / profile.pollSeconds);
  const per = (c: TrafficClass): TrafficClass => ({ messages: round(c.messages / sessions, 2), bytes: Math.round(c.bytes / sessions) });
  const perSession = { transactions: per(counts.transactions), other: per(counts.other) };
  return {
    sessions,
    perSession,
    runningStateBytes,
    profile,
    perHour: {
      messages: Math.round(sessionsPerHour * (perSession.transactions.messages + perSession.other.messages) + runningPerHour),
      bytes: Math.round(sessionsPerHour * (perSession.transactions.bytes + perSession.other.bytes) + runningPerHour * runningStateBytes),
    },
  };
}
