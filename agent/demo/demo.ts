import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import type { Writable } from 'node:stream';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt from 'mqtt';
import { build, type Agent } from '../build.js';
import { systemClock } from '../platform/clock.js';
import { validateConfig } from '../config/load.js';
import { formatVendorTime } from '../time/vendor-time.js';
import { errorMessage } from '../platform/errors.js';
import { SimGpioDriver } from '../gpio/sim-driver.js';
import { chairLedName, STATUS_LED } from '../gpio/indicators.js';
import { streamLogSink } from '../platform/log-sink.js';
import { createLogger, type Logger } from '../platform/logger.js';
import { Simulator } from '../simulator/simulator.js';
import { endpointOptions } from '../mqtt/client-options.js';
import { EmbeddedBroker } from './embedded-broker.js';
import { chairLine, renderView, timeLine, type DemoSnapshot } from './view.js';

const BUTTONS = [17, 22, 24, 6, 12, 16, 20, 26, 4];
const LEDS = [27, 23, 25, 13, 19, 21, 18, 7, 8];
const STATUS_PIN = 5;
const API_KEY = 'demo-api-key';
const SECRET = 'demo-channel-secret';

export interface DemoOptions {
  chairs: number;
  minuteSeconds: number;
  /** A terminal to draw on and read keys from; without one the demo logs instead. */
  tty?: { input: NodeJS.ReadStream; write: (text: string) => void } | undefined;
  /** Plain output (no terminal). */
  out: (text: string) => void;
  /** Where the logs and the plain output go without a terminal (main.ts: stdout as `run` writes it); else `out`. */
  logOutput?: (() => Writable) | undefined;
  signal: AbortSignal;
  timeZone?: string;
}

interface Parts {
  sim: Simulator;
  broker: EmbeddedBroker;
  gpio: SimGpioDriver;
  agent: Agent;
  watcher: mqtt.MqttClient;
  dir: string;
  minuteSeconds: number;
}

export async function runDemo(opts: DemoOptions): Promise<void> {
  const tz = opts.timeZone ?? 'Asia/Bangkok';
  const dir = mkdtempSync(join(tmpdir(), 'chair-agent-demo-'));
  const events: string[] = [];
  // On a terminal the screen is the view, so logs go to a file; without one they go to stdout,
  // with the demo's own lines. Either way through the sink `run` logs with: a full disk or a
  // reader that stops never stops the demo.
  const logFile = join(dir, 'agent.log');
  const sink = opts.tty
    ? streamLogSink(createWriteStream(logFile), { reopen: () => createWriteStream(logFile, { flags: 'a' }) })
    : opts.logOutput
      ? streamLogSink(opts.logOutput(), { reopen: opts.logOutput })
      : undefined;
  const plain = (text: string): void => (sink && !opts.tty ? sink.write(text) : opts.out(text));
  const event = (text: string): void => {
    const line = `${formatVendorTime(Date.now(), tz).slice(11)}  ${text}`;
    events.push(line);
    if (events.length > 50) events.shift();
    if (!opts.tty) plain(`demo: ${text}\n`);
  };
  const logger: Logger = createLogger({ level: 'info', destination: sink });

  const broker = new EmbeddedBroker();
  await broker.start();
  const sim = new Simulator({
    apiKey: API_KEY,
    chairs: opts.chairs,
    minuteMs: opts.minuteSeconds * 1000,
    timeZone: tz,
    // Told where the agent listens once it does (below).
    webhook: { url: 'http://127.0.0.1:0/vendor/webhook', secret: SECRET },
    logger: logger.child({ component: 'simulator' }),
  });
  await sim.start();
  const chairs = [...sim.model.chairs.keys()];
  const config = validateConfig(
    {
      site: { id: 'demo', timezone: tz },
      vendor: { baseUrl: sim.url, apiKey: API_KEY, pollSeconds: 1, requestTimeoutSeconds: 3, retries: 1 },
      transactions: { syncSchedule: '*/10 * * * * *', lookbackHours: 1 },
      webhook: { channelSecret: SECRET },
      // The agent takes a free port as it listens: a port found free beforehand can be taken by
      // another process before the agent binds it.
      http: { host: '127.0.0.1', port: 0 },
      mqtt: { url: broker.url, protocolVersion: 4, reconnectSeconds: 1 },
      storage: { path: join(dir, 'agent.db') },
      gpio: {
        driver: 'sim',
        statusLed: STATUS_PIN,
        chairs: chairs.map((deviceId, i) => ({ deviceId, button: BUTTONS[i], led: LEDS[i] })),
      },
      start: { confirmIntervalSeconds: 0.5 },
      log: { level: 'info' },
    },
    'demo',
    { env: {} },
  ).config;
  const gpio = new SimGpioDriver(systemClock);
  const agent = build(config, { logger, gpio });
  await agent.start();
  const agentPort = agent.http.address().port;
  sim.webhooks?.retarget(`http://127.0.0.1:${agentPort}/vendor/webhook`);

  const watcher = mqtt.connect({ ...endpointOptions({ url: broker.url, protocolVersion: 4, rejectUnauthorized: true }), reconnectPeriod: 1000, clientId: 'chair-agent-demo-view' });
  watcher.on('connect', () => void watcher.subscribeAsync(`${agent.topics.base}/transactions/+`, { qos: 1 }).catch(() => undefined));
  watcher.on('message', (_topic, payload) => {
    try {
      const t = JSON.parse(payload.toString()) as Record<string, unknown>;
      event(`transaction ${String(t['TransactionId'])} ${String(t['Status'])} ${String(t['DeviceId'])} ${String(t['PaymentMethod'])} ${String(t['Amount'])} arrived over MQTT`);
    } catch {
      // not ours to judge
    }
  });
  agent.starts.on('finished', (o) => event(o.ok ? `${o.deviceId} started (${o.minutes} min)` : `${o.deviceId} not started: ${o.error}`));
  agent.health.on('change', (name, check) => event(`${name}: ${check.ok ? 'ok' : 'problem'} (${check.detail})`));

  const parts: Parts = { sim, broker, gpio, agent, watcher, dir, minuteSeconds: opts.minuteSeconds };
  const watch = `mosquitto_sub -h 127.0.0.1 -p ${broker.port} -V mqttv311 -t '${config.mqtt.baseTopic}/#' -v`;
  event('demo ready: press a chair\'s number key');
  if (!opts.tty) {
    plain(`demo: simulator ${sim.url}, broker ${broker.url}, agent http://127.0.0.1:${agentPort} (/healthz, /metrics, /sim/gpio)\n`);
    plain(`demo: watch it with: ${watch}\n`);
    plain(`demo: press a button with: curl -X POST http://127.0.0.1:${agentPort}/sim/gpio/${BUTTONS[0]}/press\n`);
    plain(`demo: ${timeLine(opts.minuteSeconds)}\n`);
  }

  const actions = demoActions(parts, event);
  let quit: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => (quit = resolve));
  opts.signal.addEventListener('abort', () => quit(), { once: true });

  let frame: NodeJS.Timeout | null = null;
  if (!opts.tty) {
    // Without a terminal, each chair's line of the table is printed when it changes.
    const shown = new Map<string, string>();
    frame = setInterval(() => {
      for (const ch of snapshot(parts, events, watch, false).chairs) {
        const line = chairLine(ch, false);
        if (shown.get(ch.deviceId) !== line) plain(`demo: chair${line}\n`);
        shown.set(ch.deviceId, line);
      }
    }, 1000);
  }
  if (opts.tty) {
    const tty = opts.tty;
    tty.write('\x1b[?1049h\x1b[?25l');
    const draw = (): void => tty.write(`\x1b[H${renderView(snapshot(parts, events, watch, true)).map((l) => `${l}\x1b[K`).join('\n')}\x1b[J`);
    frame = setInterval(draw, 100);
    draw();
    tty.input.setRawMode?.(true);
    tty.input.resume();
    tty.input.on('data', (data: Buffer) => {
      const key = data.toString();
      if (key === 'q' || key === '\u0003') quit();
      else void actions.key(key);
    });
  }

  await finished;
  if (frame) clearInterval(frame);
  if (opts.tty) {
    opts.tty.input.setRawMode?.(false);
    opts.tty.input.pause();
    opts.tty.write('\x1b[?25h\x1b[?1049l');
  }
  await watcher.endAsync(true).catch(() => undefined);
  await agent.stop();
  await sim.close();
  await broker.close();
  logger.flush();
  plain('demo stopped\n');
  await sink?.flushed();
  sink?.close();
  rmSync(dir, { recursive: true, force: true });
}

function demoActions(p: Parts, event: (text: string) => void): { key(k: string): Promise<void> } {
  const chairs = [...p.sim.model.chairs.keys()];
  return {
    async key(k) {
      try {
        if (/^[1-9]$/.test(k) && Number(k) <= chairs.length) {
          const i = Number(k) - 1;
          event(`button ${k} pressed (${chairs[i]}, BCM ${BUTTONS[i]})`);
          await p.gpio.press(BUTTONS[i] as number);
        } else if (k === 'p') {
          const r = p.sim.paidUse(undefined, 5);
          event(r.ok ? `a customer paid at the vendor: ${String(r.transaction['DeviceId'])}, 5 min` : 'no idle chair for a paid use');
        } else if (k === 'v') {
          if (p.sim.isListening()) {
            await p.sim.stop();
            event('vendor uplink cut');
          } else {
            await p.sim.start();
            event('vendor uplink restored');
          }
        } else if (k === 'b') {
          if (p.broker.running) {
            await p.broker.down();
            event('broker stopped: transactions wait in the outbox');
          } else {
            await p.broker.start();
            event('broker restored');
          }
        }
      } catch (err) {
        event(`that did not work: ${errorMessage(err)}`);
      }
    },
  };
}

function snapshot(p: Parts, events: string[], watch: string, color: boolean): DemoSnapshot {
  const lines = p.gpio.state();
  const stats = p.agent.outbox.stats();
  const vendor = p.agent.health.get('vendor');
  const ids = [...p.sim.model.chairs.keys()];
  return {
    site: p.agent.config.site.id,
    vendor: { ok: vendor.ok, cut: !p.sim.isListening(), detail: vendor.detail },
    broker: { connected: p.agent.broker.connected, down: !p.broker.running },
    backlog: { pending: stats.pending, delivered: stats.delivered },
    statusLed: p.agent.leds.shown(STATUS_LED),
    statusLedOn: lines[String(STATUS_PIN)]?.value === 1,
    chairs: ids.map((id, i) => {
      const view = p.agent.registry.view(id);
      return {
        key: String(i + 1),
        deviceId: id,
        status: view?.state?.status ?? '',
        remainingSeconds: view?.state?.remainingSeconds ?? null,
        seated: view?.state?.seated ?? false,
        online: view?.online ?? false,
        led: p.agent.leds.shown(chairLedName(id)),
        ledOn: lines[String(LEDS[i])]?.value === 1,
      };
    }),
    events,
    watch,
    color,
    minuteSeconds: p.minuteSeconds,
  };
}
