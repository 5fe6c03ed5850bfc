import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import mqtt from 'mqtt';
import { Simulator } from '../agent/simulator/simulator.js';
import { startAgent, writeAgentConfig } from './lib/agent-proc.js';
import { startBroker } from './lib/broker.js';
import { median, round } from './lib/stats.js';

export interface StartupResult {
  runs: number[];
  median: number;
}

/** From spawning `chair-agent run` to the first retained chair state at a subscriber. */
export async function benchStartup(runs = 7): Promise<StartupResult> {
  const broker = await startBroker();
  const sim = new Simulator({ apiKey: 'start-key', chairs: 16 });
  await sim.start();
  const times: number[] = [];
  try {
    for (let i = 0; i < runs; i++) {
      const dir = mkdtempSync(join(tmpdir(), 'bench-start-'));
      const site = `start${i}`;
      const config = writeAgentConfig(
        dir,
        `site: {id: ${site}}
vendor: {baseUrl: "${sim.url}", apiKey: start-key}
webhook: {channelSecret: start-secret}
http: {host: 127.0.0.1, port: 0}
mqtt: {url: "${broker.url}"}
storage: {path: ${join(dir, 'agent.db')}}
log: {level: warn}
`,
      );
      const sub = await mqtt.connectAsync(broker.url);
      await sub.subscribeAsync(`chair-agent/${site}/chairs/+`);
      const first = new Promise<void>((resolve) => sub.once('message', () => resolve()));
      const t0 = performance.now();
      const agent = startAgent(config);
      await first;
      times.push(performance.now() - t0);
      await agent.stop();
      await sub.endAsync();
      rmSync(dir, { recursive: true, force: true });
    }
  } finally {
    await sim.close();
    await broker.stop();
  }
  return { runs: times.map((t) => Math.round(t)), median: round(median(times), 0) };
}
