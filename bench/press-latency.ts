import { performance } from 'node:perf_hooks';
import { build } from '../agent/build.js';
import { validateConfig } from '../agent/config/load.js';
import { SimGpioDriver } from '../agent/gpio/sim-driver.js';
import { silentLogger } from '../agent/platform/logger.js';
import { Simulator } from '../agent/simulator/simulator.js';
import { systemClock } from '../agent/platform/clock.js';
import { startBroker } from './lib/broker.js';
import { percentile, round } from './lib/stats.js';

export interface PressResult {
  presses: number;
  debounceMs: number;
  p50: number;
  p99: number;
  max: number;
}

async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = performance.now() + 10_000;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * From the moment a button line goes low to the moment the vendor (the simulator) receives the
 * control request: debounce, start rules and the HTTP call included.
 */
export async function benchPressLatency(presses = 200, debounceMs = 30): Promise<PressResult> {
  const broker = await startBroker();
  let pressedAt = 0;
  const samples: number[] = [];
  const sim = new Simulator({
    apiKey: 'bench-key',
    chairs: 4,
    onRequest: (endpoint) => {
      if (endpoint === 'control' && pressedAt > 0) {
        samples.push(performance.now() - pressedAt);
        pressedAt = 0;
      }
    },
  });
  await sim.start();
  const chairs = [...sim.model.chairs.keys()];
  const config = validateConfig(
    {
      site: { id: 'bench' },
      vendor: { baseUrl: sim.url, apiKey: 'bench-key', pollSeconds: 0.2 },
      webhook: { enabled: false },
      http: { host: '127.0.0.1', port: 0 },
      mqtt: { url: broker.url },
      storage: { path: ':memory:' },
      gpio: { driver: 'sim', debounceMs, chairs: chairs.map((deviceId, i) => ({ deviceId, button: 17 + i, led: 5 + i })) },
      start: { confirmIntervalSeconds: 0.05 },
      log: { level: 'silent' },
    },
    'bench',
    { env: {} },
  ).config;
  const gpio = new SimGpioDriver(systemClock);
  const agent = build(config, { logger: silentLogger(), gpio });
  await agent.start();
  try {
    await until(() => chairs.every((id) => agent.registry.view(id)?.state?.startable && agent.registry.view(id)?.online), 'chairs listed');
    for (let i = 0; i < presses; i++) {
      const index = i % chairs.length;
      const id = chairs[index] as string;
      await until(() => agent.registry.view(id)?.state?.startable === true && !agent.starts.isStarting(id), `${id} idle`);
      pressedAt = performance.now();
      await gpio.press(17 + index);
      await until(() => pressedAt === 0, 'the control request');
      await until(() => !agent.starts.isStarting(id), 'the start to finish');
      const chair = sim.model.chairs.get(id);
      if (chair) chair.sessionEndsAt = null; // end the session so the next press is a real start
    }
  } finally {
    await agent.stop();
    await sim.close();
    await broker.stop();
  }
  return {
    presses: samples.length,
    debounceMs,
    p50: round(percentile(samples, 50), 1),
    p99: round(percentile(samples, 99), 1),
    max: round(Math.max(...samples), 1),
  };
}
