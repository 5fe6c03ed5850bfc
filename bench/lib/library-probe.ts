/**
 * One library's memory cost, measured in a fresh process: RssAnon and RssFile before and after
 * loading it and doing what the agent would do with it. Prints one JSON line.
 * Usage: node --expose-gc dist/bench/lib/library-probe.js intl|prom-client|debug|node-cron|none
 */
import { readFileSync } from 'node:fs';

const kb = (field: string): number => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? 0);
const settle = async (): Promise<void> => {
  (globalThis as { gc?: () => void }).gc?.();
  await new Promise((r) => setTimeout(r, 50));
};
// Module names in variables: the bundler leaves them to Node, and a library not installed is reported, not fatal.
const load = (name: string): Promise<Record<string, unknown>> => import(name) as Promise<Record<string, unknown>>;

const what = process.argv[2] ?? 'none';
await settle();
const anon0 = kb('RssAnon');
const file0 = kb('RssFile');
let keep: unknown;
try {
  if (what === 'intl') {
    // What node-cron's scheduler and a time-zone library do: one formatter for the site's zone.
    const f = new Intl.DateTimeFormat('en-US', { timeZone: 'Asia/Bangkok', hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' });
    for (let i = 0; i < 1000; i++) f.formatToParts(Date.now() + i * 3_600_000);
    keep = f;
  } else if (what === 'prom-client') {
    // The agent's metrics in prom-client: a dozen families, a scrape.
    const p = (await load('prom-client')) as { Registry: new () => { metrics(): Promise<string> }; Counter: new (o: object) => { inc(l: object): void } };
    const registry = new p.Registry();
    const counters = Array.from({ length: 12 }, (_, i) => new p.Counter({ name: `c${i}`, help: 'h', labelNames: ['a'], registers: [registry] }));
    counters.forEach((c, i) => c.inc({ a: String(i) }));
    await registry.metrics();
    keep = counters;
  } else if (what === 'debug') {
    // What mqtt.js loads when `debug` is not replaced: three namespaces, each called.
    const d = ((await load('debug')) as { default: (ns: string) => (...a: unknown[]) => void }).default;
    const loggers = ['mqttjs', 'mqtt-packet:parser', 'mqtt-packet:writeToStream'].map((ns) => d(ns));
    loggers.forEach((l) => l('hello %s', 'x'));
    keep = loggers;
  } else if (what === 'node-cron') {
    // node-cron's own scheduler with the site's zone, in place of ours.
    const c = ((await load('node-cron')) as { default: { schedule(e: string, f: () => void, o: object): { stop(): void } } }).default;
    keep = c.schedule('*/30 * * * * *', () => undefined, { timezone: 'Asia/Bangkok' });
  }
} catch (err) {
  process.stdout.write(`${JSON.stringify({ what, missing: err instanceof Error ? err.message.split('\n')[0] : String(err) })}\n`);
  process.exit(0);
}
await settle();
process.stdout.write(`${JSON.stringify({ what, anonMb: (kb('RssAnon') - anon0) / 1024, fileMb: (kb('RssFile') - file0) / 1024, kept: keep !== undefined })}\n`);
process.exit(0);
