import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build, type Agent } from '../../agent/build.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { startBroker, type TestBroker } from './broker.js';
import type { BrokerOptions } from '../../bench/lib/broker.js';
import { TEST_API_KEY, testConfig } from './config.js';
import { memoryLogger, type LogRecord } from './memory-logger.js';
import { Subscriber } from './subscriber.js';
import { runCli, type CliResult } from './cli.js';

export interface Rig {
  broker: TestBroker;
  sim: Simulator;
  agent: Agent;
  /** The agent's log lines. */
  lines: LogRecord[];
  /** http://127.0.0.1:<agent port> */
  base: string;
  /** Subscribed before the agent started (opts.subscribe), as Home Assistant is at a site. */
  sub: Subscriber | null;
  close(): Promise<void>;
}

/** A real broker, the simulator and an in-process agent wired to both, started. */
export async function startRig(opts: {
  site: string;
  sections?: Record<string, Record<string, unknown>>;
  chairs?: number;
  minuteMs?: number;
  /** Mosquitto's configuration beyond the default (ACLs, size and queue limits). */
  broker?: BrokerOptions;
  /** Topic filters a subscriber takes before the agent starts: it sees everything from the first message. */
  subscribe?: string[];
}): Promise<Rig> {
  const broker = await startBroker(opts.broker);
  const sim = new Simulator({ apiKey: TEST_API_KEY, chairs: opts.chairs ?? 2, minuteMs: opts.minuteMs ?? 60_000 });
  await sim.start();
  const sub = opts.subscribe ? await Subscriber.connect(broker.url, opts.subscribe) : null;
  const { logger, lines } = memoryLogger(process.env['RIG_LOG'] === 'debug' ? 'debug' : 'info');
  const agent = build(testConfig({ vendorUrl: sim.url, brokerUrl: broker.url }, { ...opts.sections, site: { ...opts.sections?.['site'], id: opts.site } }), { logger });
  await agent.start();
  return {
    broker,
    sim,
    agent,
    lines,
    base: `http://127.0.0.1:${agent.http.address().port}`,
    sub,
    async close() {
      await agent.stop();
      await sub?.close();
      await sim.close();
      await broker.stop();
    },
  };
}

/**
 * `chair-agent doctor` as an installer runs it at the rig's site (Home Assistant on), after the
 * agent has published its report (bridge/info) for doctor to read from the broker.
 */
export async function doctorAt(rig: Rig, site: string): Promise<CliResult> {
  const dir = mkdtempSync(join(tmpdir(), 'doctor-'));
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    `site: {id: ${site}}\nvendor: {baseUrl: "${rig.sim.url}", apiKey: ${TEST_API_KEY}}\nwebhook: {enabled: false}\nmqtt: {url: "${rig.broker.url}"}\nhomeassistant: {enabled: true}\nstorage: {path: ${join(dir, 'agent.db')}}\ngpio: {driver: sim}\n`,
  );
  rig.agent.bridge.publishInfo();
  return runCli(['doctor', '--config', config]);
}
