/**
 * `npm run bench`: every benchmark, the agent and its peers side by side in one run, written to
 * docs/BENCHMARKS.md. `npm run bench -- flush ingest` runs only the named ones and prints them
 * without writing the file. BENCH_IDLE_SECONDS sets the idle window (default 120).
 */
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchBacklog } from './backlog.js';
import { benchFlush, type FlushResult } from './flush.js';
import { benchIdleFootprint, type Footprint, type IdleResult } from './idle-footprint.js';
import { benchIngest } from './ingest.js';
import { machineDescription } from './lib/machine.js';
import { describePaired, loadNow } from './lib/paired.js';
import { median, round } from './lib/stats.js';
import { machineLimits } from './limits.js';
import { benchPressLatency } from './press-latency.js';
import { benchSiteTraffic } from './site-traffic.js';
import { benchLibraries } from './library-costs.js';
import { benchStartup } from './startup.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const NAMES = ['limits', 'flush', 'backlog', 'ingest', 'startup', 'idle', 'press', 'traffic', 'libraries'] as const;
const only = process.argv.slice(2);
for (const n of only) if (!(NAMES as readonly string[]).includes(n)) throw new Error(`unknown benchmark ${n}; names: ${NAMES.join(', ')}`);
const want = (name: (typeof NAMES)[number]): boolean => only.length === 0 || only.includes(name);
const sections: string[] = [];
const summary: string[] = [];
const log = (text: string): void => void process.stderr.write(`${text}\n`);
const ok = (value: number, goal: number, atMost: boolean): string => ((atMost ? value <= goal : value >= goal) ? 'met' : '**not met**');

// Filled in by the flush: Mosquitto's QoS 1 rate is the tight publisher's, one row per record count.
const mosquittoRates: string[] = [];
let limitsAt = -1;
let renderLimits = (): string => '';
if (want('limits')) {
  log('machine limits ...');
  const l = await machineLimits();
  log(JSON.stringify(l));
  renderLimits = () => `## This machine's limits

| limit | value |
|---|---|
| fsync of a 512-byte write, per second | ${l.fsyncPerSecond} |
| SQLite commits per second (WAL, synchronous=FULL, one row each) | ${l.sqliteFullCommitsPerSecond} |
${mosquittoRates.join('\n')}${mosquittoRates.length > 0 ? '\n' : ''}| empty Node start-up (\`node -e\`, spawn to exit) | ${l.emptyNodeStartMs} ms |
| empty Node RSS | ${l.emptyNodeRssMb} MB |
`;
  limitsAt = sections.push('') - 1;
}

if (want('flush')) {
  const rows: string[] = [];
  for (const n of [10_000, 100_000]) {
    log(`flush after a broker outage: ${n} records, agent vs tight mqtt.js publisher ...`);
    const r: FlushResult = await benchFlush(n, n > 10_000 ? 3 : 7);
    log(JSON.stringify(r));
    const peerRate = Math.round(n / (median(r.peerMs) / 1000));
    const agentRate = Math.round(n / (median(r.agentMs) / 1000));
    mosquittoRates.push(`| Mosquitto QoS 1 end to end, one publisher to one subscriber, per second (the tight publisher, ${n.toLocaleString('en')} records after a restart) | ${peerRate} |`);
    summary.push(`| Flush of ${n.toLocaleString('en')} records after a broker outage, vs a tight QoS 1 publisher (goal >= 0.9) | **${r.ratio}** (${ok(r.ratio, 0.9, false)}); reconnect p50 ${median(r.reconnectMs)} ms (goal <= 250) |`);
    rows.push(`| ${n} | ${median(r.peerMs)} ms (${peerRate}/s) | ${median(r.agentMs)} ms (${agentRate}/s) | **${r.ratio}** | ${median(r.reconnectMs)} ms | ${r.peerMs.join(', ')} | ${r.agentMs.join(', ')} |`);
  }
  sections.push(`## Flush after a broker outage

What: N records waiting (the agent's in its SQLite outbox, the peer's in memory), the broker
stopped for 3 s, then started again; timed from the moment it listens again to the last record at a
persistent QoS 1 subscriber (a real client, counting). Both reconnect by themselves. The peer is
\`bench/peers/tight-publisher.ts\`: mqtt.js, QoS 1, a bounded window of the broker's Receive
Maximum, nothing else. Runs alternate which goes first. Ratio = agent throughput / peer throughput.

| records | tight publisher | agent | ratio | agent reconnect p50 | peer runs (ms) | agent runs (ms) |
|---|---|---|---|---|---|---|
${rows.join('\n')}
`);
}

if (want('backlog')) {
  log('1M records waiting: event-loop blocks while they flush ...');
  const r = await benchBacklog();
  log(JSON.stringify(r));
  summary.push(`| Longest event-loop block while 1M waiting records flush (goal <= 50 ms) | **${r.maxMs} ms** (${ok(r.maxMs, 50, true)}); /healthz p99 ${r.p99Ms} ms |`);
  sections.push(`## A million waiting records

What: ${r.rows.toLocaleString('en')} records waiting in the outbox (a long outage), the broker up. While the agent flushes them,
\`GET /healthz\` is sent again as soon as the previous one is answered, for ${r.seconds} s (${r.probes} requests): a request
answered late means the event loop was blocked. Backlog figures (bridge/info, /metrics, the status page) come from
counters kept with the rows, not from counting them; commits of new records and WAL checkpoints (the fsyncs) run on the
store's worker thread.

| /healthz p50 | p99 | max (the longest block) | delivered meanwhile |
|---|---|---|---|
| ${r.p50Ms} ms | ${r.p99Ms} ms | ${r.maxMs} ms | ${r.deliveredPerSecond} records/s |
`);
}

if (want('ingest')) {
  log('webhook ingest: agent vs one-commit-per-request peer, 16 clients ...');
  const r = await benchIngest(4000, 16, 5);
  log(JSON.stringify(r));
  summary.push(`| Webhook ingest at 16 clients vs the one-commit-per-request peer (goal >= 1.5) | **${r.ratio}** (${ok(r.ratio, 1.5, false)}); p99 ${r.agent.p99Ms} vs ${r.peer.p99Ms} ms; ${r.agent.bytesPerRecord} vs ${r.peer.bytesPerRecord} bytes written per record |`);
  sections.push(`## Webhook ingest

What: ${r.requests} distinct signed records per run from ${r.concurrency} concurrent keep-alive clients, ${r.runs} runs
alternating, against the agent (broker up, publishing what it stores) and \`bench/peers/webhook-peer.ts\`
(HMAC check, JSON parse, one better-sqlite3 commit per request with WAL and synchronous=FULL, then 200).
Both answer 200 only once the record's commit is on disk; the agent commits on its store worker thread and
groups the records that arrive while the previous commit is on its way to disk (a compact body, as here, is
parsed without a reviver; one with spaces or non-shortest numbers takes the verbatim parse). Bytes are what the process caused to be written
(/proc/PID/io), the checkpoint after each run included. Every record is counted in both databases.

| | answered per second (runs) | p50 | p99 | bytes written per record |
|---|---|---|---|---|
| peer | ${r.peer.perSecond.join(', ')} | ${r.peer.p50Ms} ms | ${r.peer.p99Ms} ms | ${r.peer.bytesPerRecord} |
| agent | ${r.agent.perSecond.join(', ')} | ${r.agent.p50Ms} ms | ${r.agent.p99Ms} ms | ${r.agent.bytesPerRecord} |

Ratio (medians): **${r.ratio}**.
`);
}

if (want('startup')) {
  log('start-up to the first retained chair state: agent vs bare loop, then 1M + 1M records ...');
  const r = await benchStartup();
  log(JSON.stringify(r));
  summary.push(`| Start-up to the first retained chair state vs the bare loop (goal <= 1.3) | **${r.fresh.ratio}** (${ok(r.fresh.ratio, 1.3, true)}); with 1M undelivered + 1M expired records ${r.big.ratio} |`);
  sections.push(`## Start-up

What: from spawning the process to the first retained chair state at a subscriber (${r.chairs} chairs):
\`chair-agent run\` (fresh database) against the bare poll-and-publish loop (\`bench/peers/bare-poller.ts\`),
alternating; then the agent on a copy of a database holding ${r.big.rows.toLocaleString('en')} undelivered and
${r.big.rows.toLocaleString('en')} expired records.

| | median | runs (ms) |
|---|---|---|
| bare loop | ${r.fresh.bare.median} ms | ${r.fresh.bare.runs.join(', ')} |
| agent, fresh database | ${r.fresh.agent.median} ms | ${r.fresh.agent.runs.join(', ')} |
| agent, 1M undelivered + 1M expired | ${r.big.agent.median} ms | ${r.big.agent.runs.join(', ')} |
`);
}

if (want('idle')) {
  const windowSeconds = Number(process.env['BENCH_IDLE_SECONDS'] ?? 120);
  const row = (name: string, f: Footprint): string =>
    `| ${name} | ${f.rssAnonMbMedian} MB | ${f.rssFileMbMedian} MB | ${f.rssMbMedian} MB (max ${f.rssMbMax}) | ${f.cpuSecondsPerHour} s | ${f.diskBytesPerHour} B | ${f.logBytesPerHour === null ? '-' : `${f.logBytesPerHour} B`} | ${f.listRequestsPerSecond} |`;
  const results: IdleResult[] = [];
  for (const chairs of [16, 1000]) {
    log(`idle footprint: ${chairs} chairs polled every second, ${windowSeconds} s ...`);
    const r = await benchIdleFootprint(windowSeconds, 20, chairs);
    log(JSON.stringify(r));
    results.push(r);
  }
  const [small, large] = results as [IdleResult, IdleResult];
  const anonExcess = round(small.agent.rssAnonMbMedian - small.bare.rssAnonMbMedian, 1);
  summary.push(`| Idle RssAnon over the bare loop's, 16 chairs (goal <= +10 MiB) | **+${anonExcess} MB** (${ok(anonExcess, 10, true)}): ${small.agent.rssAnonMbMedian} vs ${small.bare.rssAnonMbMedian} MB; RssFile ${small.agent.rssFileMbMedian} vs ${small.bare.rssFileMbMedian} MB, load ${loadNow()} |`);
  summary.push(`| CPU at 1000 chairs vs the bare loop (goal <= 1.1) | **${describePaired(large.cpuRatio)}** (${ok(large.cpuRatio.median, 1.1, true)}): ${large.agent.cpuSecondsPerHour} vs ${large.bare.cpuSecondsPerHour} CPU-s per hour |`);
  summary.push(`| Idle disk writes per hour | ${small.agent.diskBytesPerHour} B |`);
  sections.push(`## Idle footprint and CPU per chair

What: N idle chairs polled every second for ${windowSeconds} s (after a 20 s warm-up), measured from /proc:
the agent (\`chair-agent run\`, default config: transaction sync every 30 s, HTTP listener, SQLite
outbox, metrics) and the bare loop (\`bench/peers/bare-poller.ts\`: mqtt.js and Node's own fetch, publishes a
chair's state when it changed; no database, listener, sync or metrics), each against its own
simulator, both to the same Mosquitto, at the same time.

| process | RssAnon (cannot be reclaimed) | RssFile (reclaimable) | RSS | CPU per hour | disk writes per hour | log bytes per hour | list requests per second |
|---|---|---|---|---|---|---|---|
${row('agent, 16 chairs', small.agent)}
${row('bare loop, 16 chairs', small.bare)}
${row('agent, 1000 chairs', large.agent)}
${row('bare loop, 1000 chairs', large.bare)}
`);
}

if (want('press')) {
  log('press-to-request latency over simulated lines ...');
  const r = await benchPressLatency();
  log(JSON.stringify(r));
  summary.push(`| Button press to control request (p50 / p99, ${r.debounceMs} ms debounce included) | ${r.p50} / ${r.p99} ms |`);
  sections.push(`## Press-to-request latency

What: a staff button press on a simulated line (the sim GPIO driver) to the moment the vendor
simulator receives the control request, over ${r.presses} presses on 4 chairs, the ${r.debounceMs} ms debounce included.

| p50 | p99 | max |
|---|---|---|
| ${r.p50} ms | ${r.p99} ms | ${r.max} ms |
`);
}

if (want('libraries')) {
  log('memory of the libraries the agent replaces by hand ...');
  const r = benchLibraries();
  log(JSON.stringify(r));
  const rows = r.map((l) => `| ${l.what} | ${l.anonMb === null ? `not installed (${l.missing})` : `${l.anonMb} MB`} | ${l.fileMb === null ? '-' : `${l.fileMb} MB`} | ${l.replacedBy} |`);
  sections.push(`## What the hand-written replacements save

What: each library loaded in a fresh Node process and used as the agent would use it (one
formatter for the site's zone; a dozen counters and a scrape; mqtt.js's three debug namespaces;
node-cron's scheduler with a zone), RssAnon and RssFile before and after, median of 3
(\`bench/lib/library-probe.ts\`). RssAnon is what the box cannot reclaim. A library not installed
here (prom-client is not a dependency: \`npm i --no-save prom-client\` to measure it) is named.
Whether each replacement earns its keep is in docs/ARCHITECTURE.md.

| library | RssAnon added | RssFile added | replaced by |
|---|---|---|---|
${rows.join('\n')}
`);
}

if (want('traffic')) {
  log('site traffic: 48 sessions against the simulator ...');
  const r = await benchSiteTraffic();
  log(JSON.stringify(r));
  summary.push(`| A busy site's traffic to its broker (docs/FLEET.md) | ${r.perHour.messages} messages, ${Math.round(r.perHour.bytes / 1024)} KiB per hour |`);
  sections.push(`## Site traffic (for the fleet's capacity, docs/FLEET.md)

What: ${r.sessions} paid sessions on 16 simulated chairs (a minute lasts 100 ms, webhooks on), every message the agent
published counted at a subscriber with its size as an MQTT PUBLISH. Per session: ${r.perSession.transactions.messages} transaction
messages (${r.perSession.transactions.bytes} bytes) and ${r.perSession.other.messages} other messages (state changes, bridge/info; ${r.perSession.other.bytes} bytes).
A running chair's state message: ${r.runningStateBytes} bytes, once per poll (its remaining time moves).

Busy-site hour, composed from those figures: ${r.profile.chairs} chairs busy ${r.profile.busyShare * 100}% of the time in
${r.profile.sessionMinutes}-minute sessions, polled every ${r.profile.pollSeconds} s: **${r.perHour.messages} messages, ${r.perHour.bytes} bytes**.
`);
}

if (limitsAt >= 0) sections[limitsAt] = renderLimits();

if (only.length === 0) {
  const text = `# Benchmarks

Written by \`npm run bench\` (it builds, then runs \`node dist/bench/run.js\`) on
${new Date().toISOString().slice(0, 10)}. Every figure comes from this one run, on this machine:

${machineDescription().join('\n')}

Each benchmark starts its own Mosquitto on a free loopback port. The peers are in \`bench/peers/\` and
run in the same run, alternating with the agent where they take turns. Run some alone with
\`npm run bench -- <names>\` (${NAMES.join(', ')}); that prints their figures without rewriting this file.

| figure | value |
|---|---|
${summary.join('\n')}

${sections.join('\n')}`;
  writeFileSync(join(ROOT, 'docs', 'BENCHMARKS.md'), text);
  log('wrote docs/BENCHMARKS.md');
} else {
  process.stdout.write(sections.join('\n'));
}
