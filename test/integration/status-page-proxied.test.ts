import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { build, type Agent } from '../../agent/build.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { track } from '../helpers/agent-process.js';
import { TEST_API_KEY, testConfig } from '../helpers/config.js';
import { freePort, waitForPort } from '../helpers/ports.js';
import { describeWith } from '../helpers/tools.js';

/**
 * The status page where a site serves it: behind Debian's nginx at a path of its own
 * (`location /chairs/ { proxy_pass http://box:8080/; }`, nginx's defaults otherwise: it buffers
 * what the upstream sends, and speaks HTTP/1.0 to it), seen in Debian's Chromium.
 */
const CHROMIUM = '/usr/bin/chromium';
const TOKEN = 'proxied-admin-token-01';

let dir: string;
let sim: Simulator;
let agent: Agent;
let nginx: ChildProcess;
let browser: Browser;
let front: string;
/** Pages on other origins that frame the status page: a Home Assistant dashboard, and a stranger. */
let dashboard: Server;
let stranger: Server;

let dashboardPort: number;

async function framing(port = 0): Promise<Server> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    // As Home Assistant's Webpage card frames a page (frontend: hui-iframe-card.ts, and its
    // IFRAME_SANDBOX in src/util/iframe.ts, read from the frontend's source of 2026-05).
    const sandbox = 'allow-forms allow-popups allow-pointer-lock allow-same-origin allow-scripts allow-modals allow-downloads';
    res.end(`<!doctype html><title>dashboard</title><iframe id="chairs" src="http://localhost:${agent.http.address().port}/" sandbox="${sandbox}" allow="fullscreen" width="400" height="800"></iframe>`);
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return server;
}
const originOf = (s: Server): string => `http://127.0.0.1:${(s.address() as { port: number }).port}`;

beforeAll(async () => {
  if (!existsSync(CHROMIUM) || !existsSync('/usr/sbin/nginx')) return;
  dir = mkdtempSync(join(tmpdir(), 'nginx-'));
  // nginx's workers (nobody, when started as root) write their temporary files here.
  chmodSync(dir, 0o777);
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 2, minuteMs: 60_000 });
  await sim.start();
  dashboardPort = await freePort();
  agent = build(
    testConfig(
      { vendorUrl: sim.url, brokerUrl: 'mqtt://127.0.0.1:1' },
      { site: { id: 'proxied' }, http: { host: '127.0.0.1', port: 0, adminToken: TOKEN, trustedProxies: ['127.0.0.1'], embedOrigins: [`http://127.0.0.1:${dashboardPort}`] }, gpio: { driver: 'sim', chairs: [{ deviceId: 'MC7001', button: 17, led: 27 }] } },
    ),
    { logger: silentLogger() },
  );
  await agent.start();
  dashboard = await framing(dashboardPort);
  stranger = await framing();
  const port = await freePort();
  const conf = join(dir, 'nginx.conf');
  writeFileSync(
    conf,
    `worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log;
events { worker_connections 64; }
http {
  access_log ${dir}/access.log;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  server {
    listen 127.0.0.1:${port};
    location /chairs/ {
      proxy_pass http://127.0.0.1:${agent.http.address().port}/;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    }
  }
}
`,
  );
  nginx = spawn('/usr/sbin/nginx', ['-c', conf, '-g', 'daemon off;'], { stdio: 'ignore' });
  track(nginx);
  await waitForPort(port);
  front = `http://127.0.0.1:${port}/chairs/`;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  dashboard?.close();
  stranger?.close();
  nginx?.kill();
  await agent?.stop();
  await sim?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describeWith(['chromium', 'nginx'], 'the status page behind nginx at a path of its own', () => {
  it('loads, updates live as a chair starts (nginx buffers nothing of the event stream), and its actions reach the agent', async () => {
    const page = await browser.newPage({ viewport: { width: 390, height: 844 } });
    await page.goto(front);
    const card = (id: string) => page.locator(`article[data-chair="${id}"]`);
    await expect.poll(() => card('MC7002').locator('.status').textContent(), { timeout: 15_000 }).toBe('Available');
    expect(await page.locator('#health').textContent()).not.toBe('');

    // A start made elsewhere (the vendor's app): the page hears it over the event stream.
    expect(sim.paidUse('MC7002', 5).ok).toBe(true);
    await expect.poll(() => card('MC7002').textContent(), { timeout: 15_000 }).toContain('running');

    await page.fill('#token', TOKEN);
    await page.locator('#unlock').click();
    await expect.poll(() => page.locator('#message').textContent()).toBe('token accepted: actions enabled');
    await page.close();
  });

  it('viewers behind the proxy are counted by their own address (X-Forwarded-For from a trusted proxy), not as one', async () => {
    // Five viewers from five addresses, through the one proxy: more than one address may hold.
    const streams = await Promise.all(
      [1, 2, 3, 4, 5].map(async (n) => {
        const controller = new AbortController();
        const res = await fetch(`${front}events`, { headers: { 'x-forwarded-for': `192.168.1.${n}` }, signal: controller.signal });
        return { res, controller };
      }),
    );
    try {
      expect(streams.map((s) => s.res.status)).toEqual([200, 200, 200, 200, 200]);
    } finally {
      for (const s of streams) s.controller.abort();
    }
  });

  it('a Home Assistant dashboard named in http.embedOrigins shows the page in its webpage card; any other site cannot frame it', async () => {
    /** The chair cards the framed page shows, or null when Chromium refused to frame it. */
    const shown = async (server: Server): Promise<number | null> => {
      const page = await browser.newPage();
      try {
        await page.goto(originOf(server));
        const frame = page.frames().find((f) => f !== page.mainFrame());
        if (!frame) return null;
        // A refused frame ends up holding Chromium's error page instead of the status page (its
        // URL is empty until then, which a loaded machine shows).
        await expect.poll(() => frame.url(), { timeout: 15_000 }).toMatch(/^(chrome-error:|http:)/);
        if (frame.url().startsWith('chrome-error:')) return null;
        const cards = page.frameLocator('#chairs').locator('article[data-chair]');
        await cards.first().waitFor({ timeout: 15_000 });
        return await cards.count();
      } finally {
        await page.close();
      }
    };
    expect(await shown(dashboard)).toBe(2);
    expect(await shown(stranger)).toBeNull();
  });
});
