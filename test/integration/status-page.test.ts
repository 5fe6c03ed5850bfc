import { existsSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { build, type Agent } from '../../agent/build.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { TEST_API_KEY, testConfig } from '../helpers/config.js';
import { waitFor } from '../helpers/wait.js';
import { describeWith } from '../helpers/tools.js';

/**
 * The local status page in a real browser: Debian's Chromium, headless, driven by playwright-core
 * (no browser download), against the agent on the simulator and a real broker.
 */
const CHROMIUM = '/usr/bin/chromium';
const TOKEN = 'page-admin-token-0001';

let broker: TestBroker;
let sim: Simulator;
let agent: Agent;
let browser: Browser;
let page: Page;
let base: string;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) return;
  broker = await startBroker();
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 3, minuteMs: 60_000 });
  await sim.start();
  agent = build(
    testConfig(
      { vendorUrl: sim.url, brokerUrl: broker.url },
      {
        site: { id: 'page', currency: 'THB' },
        transactions: { syncSchedule: '* * * * * *' },
        http: { host: '127.0.0.1', port: 0, adminToken: TOKEN },
        gpio: { driver: 'sim', statusLed: 5, chairs: [{ deviceId: 'MC7001', button: 17, led: 27 }, { deviceId: 'MC7002', button: 22, led: 23 }] },
      },
    ),
    { logger: silentLogger() },
  );
  await agent.start();
  base = `http://127.0.0.1:${agent.http.address().port}`;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  page = await browser.newPage({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2 });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await agent?.stop();
  await sim?.close();
  await broker?.stop();
});

const card = (id: string) => page.locator(`article[data-chair="${id}"]`);

describeWith(['chromium', 'mosquitto'], 'status page in Chromium', () => {
  it('shows every chair with its status and what its LED shows, on a phone-sized screen', async () => {
    await page.goto(`${base}/`);
    await waitFor(() => card('MC7003').count(), 'three chair cards', 15_000);
    for (const [id, name] of [['MC7001', 'Massage Chair 1'], ['MC7002', 'Massage Chair 2'], ['MC7003', 'Massage Chair 3']] as const) {
      await expect.poll(() => card(id).locator('.name').textContent()).toBe(name);
      await expect.poll(() => card(id).locator('.status').textContent()).toBe('Available');
    }
    expect(await card('MC7001').textContent()).toContain('LED: steady: available');
    expect(await page.locator('#health').textContent()).toBe('healthy');
    // Nothing is wider than the phone's screen.
    expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(390);
  });

  it('updates live when a chair starts', async () => {
    expect(sim.paidUse('MC7002', 5).ok).toBe(true);
    await expect.poll(() => card('MC7002').textContent(), { timeout: 15_000 }).toContain('slow blink: running');
    await expect.poll(() => card('MC7002').locator('.remaining').textContent()).toMatch(/^[45]:\d\d$/);
    await expect.poll(() => page.locator('#events').textContent()).toContain('MC7002');
  });

  it("shows today's uses, minutes and takings per chair and for the site", async () => {
    // The paid use above: 5 minutes at 20.00 a minute in the simulator.
    const row = page.locator('#today tbody tr', { hasText: 'MC7002' });
    await expect.poll(() => row.textContent(), { timeout: 15_000 }).toBe('MC700215promptpay 100.00');
    await expect.poll(() => page.locator('#today tr.site').textContent()).toBe('site15promptpay 100.00');
    expect(await page.locator('#today-title').textContent()).toMatch(/^Today, \d{4}-\d\d-\d\d$/);
    // The site names its currency (site.currency): the takings say it.
    expect(await page.locator('#takings-head').textContent()).toBe('takings (THB)');
  });

  it('keeps Start disabled until the server accepts the token, then starts for the minutes asked', async () => {
    const before = sim.requests.control;
    const start = card('MC7001').locator('button.start');
    expect(await start.isDisabled()).toBe(true);
    expect(await page.locator('#walk').isDisabled()).toBe(true);

    await page.fill('#token', 'not-the-admin-token-00');
    await page.locator('#unlock').click();
    await expect.poll(() => page.locator('#message').textContent()).toContain('token refused (401');
    expect(await start.isDisabled()).toBe(true);
    expect(sim.requests.control).toBe(before);

    await page.fill('#token', TOKEN);
    await page.locator('#unlock').click();
    await expect.poll(() => page.locator('#message').textContent()).toBe('token accepted: actions enabled');
    await expect.poll(() => start.isDisabled()).toBe(false);
    await page.fill('#minutes', '2');
    await start.click();
    await expect.poll(() => page.locator('#message').textContent(), { timeout: 20_000 }).toBe('Start MC7001 (2 min): done');
    expect(sim.requests.control).toBe(before + 1);
    expect(sim.model.transactions.at(-1)?.record).toMatchObject({ DeviceId: 'MC7001', PlayTime: '2' });
    await expect.poll(() => card('MC7001').textContent(), { timeout: 15_000 }).toContain('slow blink: running');
    // Minutes outside start.minMinutes..maxMinutes are refused, not stretched.
    const wrong = await fetch(`${base}/api/chairs/MC7003/start`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: '{"minutes":999}' });
    expect(wrong.status).toBe(400);
    expect(((await wrong.json()) as { error: string }).error).toMatch(/^minutes must be a whole number from 1 to 60$/);

    const shot = join(mkdtempSync(join(tmpdir(), 'page-')), 'status-page.png');
    await page.screenshot({ path: shot, fullPage: true });
    expect(statSync(shot).size).toBeGreaterThan(10_000);
    if (process.env['STATUS_PAGE_SCREENSHOT']) await page.screenshot({ path: process.env['STATUS_PAGE_SCREENSHOT'], fullPage: true });
  });

  it('walks the LEDs with the token, and not without', async () => {
    const refused = await fetch(`${base}/api/leds/walk`, { method: 'POST' });
    expect(refused.status).toBe(401);
    await page.locator('#walk').click();
    await expect.poll(() => page.locator('#message').textContent()).toBe('LED walk: done');
    await expect.poll(() => page.locator('#events').textContent()).toContain('LED walk started');
  });
});
