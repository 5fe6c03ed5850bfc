import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, type Agent } from '../../agent/build.js';
import { buttonBias } from '../../agent/gpio/gpio-from-config.js';
import { systemClock } from '../../agent/platform/clock.js';
import { GpiodDriver } from '../../agent/gpio/gpiod-driver.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { TEST_API_KEY, testConfig } from '../helpers/config.js';
import { FakeGpiod } from '../helpers/fake-gpiod.js';
import { memoryLogger, type LogRecord } from '../helpers/memory-logger.js';
import { Subscriber } from '../helpers/subscriber.js';
import { waitFor } from '../helpers/wait.js';
import { itWith } from '../helpers/tools.js';

let broker: TestBroker;
let sim: Simulator;
beforeAll(async () => {
  broker = await startBroker();
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 2, minuteMs: 60_000 });
  await sim.start();
});
afterAll(async () => {
  await sim.close();
  await broker.stop();
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function agentOn(fixture: string, site: string, chairs: Record<string, unknown>[], kernelFor?: (k: FakeGpiod) => GpiodDriver): Promise<{ agent: Agent; kernel: FakeGpiod; lines: LogRecord[]; base: string }> {
  const kernel = new FakeGpiod(fixture, systemClock);
  const config = testConfig({ vendorUrl: sim.url, brokerUrl: broker.url }, { site: { id: site }, gpio: { driver: 'gpiod', statusLed: 5, debounceMs: 30, chairs } });
  const { logger, lines } = memoryLogger('info');
  const gpio = kernelFor?.(kernel) ?? new GpiodDriver({ logger, devDir: kernel.devDir, binding: kernel, bias: buttonBias(config) });
  const agent = build(config, { logger, gpio });
  await agent.start();
  return { agent, kernel, lines, base: `http://127.0.0.1:${agent.http.address().port}` };
}

describe('buttons and LEDs on the GPIO character device', () => {
  it('a press on a Pi 5 starts the chair; its LED goes from steady to blinking; every line carries the label chair-agent', async () => {
    const { agent, kernel } = await agentOn('pi5b-trixie.txt', 'gpiod-press', [{ deviceId: 'MC7001', button: 17, led: 27 }]);
    try {
      await waitFor(() => agent.leds.shown('chair:MC7001') === 'on', 'MC7001 available, LED steady');
      expect(kernel.requestAt('gpiochip0', 17)?.config).toMatchObject({ consumer: 'chair-agent', bias: 'pull-up', activeLow: true, debounceUs: 30_000 });
      expect(kernel.requestAt('gpiochip0', 27)?.writes.at(-1)).toBe(1);
      const before = sim.requests.control;
      await kernel.press('gpiochip0', 17, 80, sleep);
      await waitFor(() => agent.registry.view('MC7001')?.state?.running, 'MC7001 running');
      expect(sim.requests.control).toBe(before + 1);
      await waitFor(() => agent.leds.shown('chair:MC7001') === 'slow', 'slow blink while running');
      await waitFor(() => (kernel.requestAt('gpiochip0', 27)?.writes.slice(-4) ?? []).join('') === '0101', 'the LED line blinking');
      expect(agent.health.get('gpio')).toMatchObject({ ok: true, detail: '1 button(s), 2 LED(s) on gpiod' });
    } finally {
      sim.model.chairs.get('MC7001')!.sessionEndsAt = null;
      await agent.stop();
    }
    expect(kernel.open).toBe(0); // released at stop
  });

  it('a GPIO chip that goes away while running is loud: the line is released, /healthz 503, the status LED bursts', async () => {
    const { agent, kernel, lines, base } = await agentOn('pi5b-trixie.txt', 'gpiod-gone', [{ deviceId: 'MC7001', button: 17, led: 27 }]);
    try {
      await waitFor(() => agent.leds.shown('status') === 'on' || agent.health.get('gpio').ok, 'GPIO ready');
      expect(agent.health.get('gpio').ok).toBe(true);
      kernel.removeChip('gpiochip0');
      expect(agent.health.get('gpio')).toMatchObject({ ok: false, detail: expect.stringMatching(/^1 line\(s\) cannot be used: button of MC7001: BCM 17 \(gpiochip0 line 17\) stopped working \(ENODEV/) });
      expect((await fetch(`${base}/healthz`)).status).toBe(503);
      expect(lines.find((l) => l.msg === 'GPIO line failed')).toMatchObject({ bcm: 17 });
      await waitFor(() => agent.leds.shown('status') === 'burst', 'the status LED bursting');
      expect(kernel.requestAt('gpiochip0', 17)).toBeUndefined();
    } finally {
      await agent.stop();
    }
  });

  itWith('mosquitto', 'a line an overlay holds is loud: /healthz 503, bridge/info and the status LED say so, and the other lines work', async () => {
    const info = await Subscriber.connect(broker.url, 'chair-agent/gpiod-busy/bridge/info');
    const { agent, lines, base } = await agentOn('pi3b-bookworm.txt', 'gpiod-busy', [
      { deviceId: 'MC7001', button: 4, led: 27 },
      { deviceId: 'MC7002', button: 22, led: 23 },
    ]);
    try {
      expect(agent.health.get('gpio').ok).toBe(false);
      expect(agent.health.get('gpio').detail).toContain('button of MC7001: BCM 4 (gpiochip0 line 4, named GPIO_GCLK) is used by "onewire@0"');
      expect((await fetch(`${base}/healthz`)).status).toBe(503);
      expect(lines.find((l) => l.msg === 'cannot open button line')?.['err']).toContain('onewire@0');
      await waitFor(() => agent.leds.shown('status') === 'burst', 'the status LED bursting');
      agent.bridge.publishInfo();
      const m = await info.waitFor((x) => (JSON.parse(x.text) as { gpio: { ok: boolean } }).gpio.ok === false, 'bridge/info with the GPIO problem');
      expect((JSON.parse(m.text) as { gpio: { detail: string } }).gpio.detail).toContain('onewire@0');
      await waitFor(() => agent.leds.shown('chair:MC7002') === 'on', 'MC7002 still works');
    } finally {
      await info.close();
      await agent.stop();
    }
  });

  it('a driver that cannot load is loud too: the agent runs, /healthz says what and how to fix it', async () => {
    const { agent, base } = await agentOn('pi4b-bookworm.txt', 'gpiod-missing', [{ deviceId: 'MC7001', button: 17, led: 27 }], () =>
      new GpiodDriver({
        logger: memoryLogger().logger,
        bias: 'pull-up',
        binding: () => {
          throw new Error("Cannot find module '/opt/chair-agent/app/native/prebuilds/linux-arm64/chair_gpiod.node'");
        },
      }),
    );
    try {
      const res = await fetch(`${base}/healthz`);
      expect(res.status).toBe(503);
      const body = (await res.json()) as { checks: { gpio: { ok: boolean; detail: string } } };
      expect(body.checks.gpio.ok).toBe(false);
      expect(body.checks.gpio.detail).toMatch(/^the gpiod addon cannot be loaded .*reinstall the package/);
      await waitFor(() => agent.registry.view('MC7001')?.online, 'the rest of the agent works');
    } finally {
      await agent.stop();
    }
  });
});
