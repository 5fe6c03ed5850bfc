import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Simulator } from '../agent/simulator/simulator.js';
import { startAgent, writeAgentConfig } from './lib/agent-proc.js';
import { startBroker } from './lib/broker.js';
import { sample, type ProcSample } from './lib/proc.js';
import { paired, type Paired } from './lib/paired.js';
import { median, round } from './lib/stats.js';

const BARE = join(dirname(fileURLToPath(import.meta.url)), 'peers', 'bare-poller.js');

export interface Footprint {
  rssMbMedian: number;
  rssMbMax: number;
  /** RssAnon, median: the memory that counts on a box (the kernel cannot reclaim it). */
  rssAnonMbMedian: number;
  /** RssFile, median: file-backed pages, reclaimable. */
  rssFileMbMedian: number;
  cpuSecondsPerHour: number;
  diskBytesPerHour: number;
  logBytesPerHour: number | null;
  listRequestsPerSecond: number;
}

export interface IdleResult {
  chairs: number;
  pollSeconds: number;
  windowSeconds: number;
  agent: Footprint;
  bare: Footprint;
  /** The agent's CPU over the bare loop's, per 5-second segment of the window (both run at once). */
  cpuRatio: Paired;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function footprint(first: ProcSample, lastSample: ProcSample, samples: ProcSample[], listRequests: number, logBytes: number | null): Footprint {
  const rss = samples.map((x) => x.rssMb);
  const hours = (lastSample.at - first.at) / 3_600_000;
  const seconds = (lastSample.at - first.at) / 1000;
  return {
    rssMbMedian: round(median(rss), 1),
    rssMbMax: round(Math.max(...rss), 1),
    rssAnonMbMedian: round(median(samples.map((x) => x.rssAnonMb)), 1),
    rssFileMbMedian: round(median(samples.map((x) => x.rssFileMb)), 1),
    cpuSecondsPerHour: round((lastSample.cpu - first.cpu) / hours, 1),
    diskBytesPerHour: Math.round((lastSample.writeBytes - first.writeBytes) / hours),
    logBytesPerHour: logBytes === null ? null : Math.round(logBytes / hours),
    listRequestsPerSecond: round(listRequests / seconds, 2),
  };
}

/** CPU seconds spent in each interval between samples. */
const segments = (samples: ProcSample[]): number[] => samples.slice(1).map((x, i) => Math.max(0.01, x.cpu - (samples[i] as ProcSample).cpu));

/**
 * 16 idle chairs polled every second, by the agent and by a bare mqtt.js loop, side by side:
 * each against its own simulator (so their requests can be counted apart) and the same broker.
 */
export async function benchIdleFootprint(windowSeconds = 180, warmupSeconds = 20, chairs = 16): Promise<IdleResult> {
  const broker = await startBroker();
  const simAgent = new Simulator({ apiKey: 'idle-key', chairs });
  const simBare = new Simulator({ apiKey: 'idle-key', chairs });
  await simAgent.start();
  await simBare.start();
  const dir = mkdtempSync(join(tmpdir(), 'bench-idle-'));
  const config = writeAgentConfig(
    dir,
    `site: {id: idle}
vendor: {baseUrl: "${simAgent.url}", apiKey: idle-key, pollSeconds: 1}
webhook: {channelSecret: idle-secret}
http: {host: 127.0.0.1, port: 0}
mqtt: {url: "${broker.url}"}
storage: {path: ${join(dir, 'agent.db')}}
`,
  );
  const agent = startAgent(config);
  const bare = spawn(process.execPath, [BARE, simBare.url, 'idle-key', broker.url], { stdio: 'ignore' });
  try {
    await sleep(warmupSeconds * 1000);
    const agentPid = agent.child.pid as number;
    const barePid = bare.pid as number;
    const a0 = sample(agentPid);
    const b0 = sample(barePid);
    const logs0 = agent.logBytes();
    const lists0 = [simAgent.requests.lists, simBare.requests.lists];
    const rssA = [a0];
    const rssB = [b0];
    for (let t = 0; t < windowSeconds; t += 5) {
      await sleep(5000);
      rssA.push(sample(agentPid));
      rssB.push(sample(barePid));
    }
    const a1 = sample(agentPid);
    const b1 = sample(barePid);
    return {
      chairs,
      pollSeconds: 1,
      windowSeconds,
      agent: footprint(a0, a1, rssA, simAgent.requests.lists - (lists0[0] as number), agent.logBytes() - logs0),
      bare: footprint(b0, b1, rssB, simBare.requests.lists - (lists0[1] as number), null),
      cpuRatio: paired(segments(rssA), segments(rssB)),
    };
  } finally {
    await agent.stop();
    await new Promise<void>((r) => {
      if (bare.exitCode !== null) return r();
      bare.once('exit', () => r());
      bare.kill('SIGTERM');
    });
    await simAgent.close();
    await simBare.close();
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
