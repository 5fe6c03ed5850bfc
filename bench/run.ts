/**
 * `npm run bench`: every benchmark, side by side in one run, written to docs/BENCHMARKS.md.
 * `npm run bench -- flush` runs only the named ones and prints them without writing the file.
 */
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchOutboxFlush, type FlushResult } from './outbox-flush.js';
import { benchPressLatency } from './press-latency.js';
import { machineDescription } from './lib/machine.js';
import { median, round } from './lib/stats.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const only = process.argv.slice(2);
const want = (name: string): boolean => only.length === 0 || only.includes(name);
const sections: string[] = [];

function log(text: string): void {
  process.stderr.write(`${text}\n`);
}

if (want('flush')) {
  log('outbox flush: 10,000 records, agent vs bare mqtt.js loop ...');
  const r: FlushResult = await benchOutboxFlush();
  log(JSON.stringify(r));
  sections.push(`## Outbox flush: 10,000 buffered transactions to Mosquitto

What: 10,000 records already in the outbox (SQLite), flushed by the agent's outbox publisher
until every one is PUBACKed and marked delivered, against a bare mqtt.js client publishing the
same 10,000 payloads at QoS 1 with \`Promise.all(publishAsync)\`, to the same broker in the same
run. Runs alternate which goes first; one warm-up round of each is not counted.

| | median | runs (ms) |
|---|---|---|
| bare mqtt.js loop | ${median(r.bareMs)} ms | ${r.bareMs.join(', ')} |
| agent outbox flush | ${median(r.agentMs)} ms | ${r.agentMs.join(', ')} |

**Ratio (agent throughput / bare loop throughput): ${r.ratio}** (goal: at least 0.8).
The agent's in-flight window was ${r.window} (its \`mqtt.maxInflight\` of 100, capped by the
broker's MQTT 5 Receive Maximum, ${r.window} on a default Mosquitto, which MQTT 5 requires a
client to honour; the bare loop ignores it, and Mosquitto 2.0 does not enforce it). The agent
also does what the bare loop does not: reads the records from SQLite, builds each payload with
its \`agent\` object, and commits the delivered marks.
`);
}

if (want('press')) {
  log('press-to-request latency over simulated lines ...');
  const r = await benchPressLatency();
  log(JSON.stringify(r));
  sections.push(`## Press-to-request latency

What: a staff button press on a simulated line (the sim GPIO driver, which debounces like onoff)
to the moment the vendor simulator receives the control request, over ${r.presses} presses on 4 chairs.
Included: the ${r.debounceMs} ms debounce (\`gpio.debounceMs\`), the start rules, the HTTP request on loopback.

| p50 | p99 | max |
|---|---|---|
| ${r.p50} ms | ${r.p99} ms | ${r.max} ms |

Without the debounce the agent's own share is p50 ${round(r.p50 - r.debounceMs, 1)} ms.
`);
}

if (only.length === 0) {
  const text = `# Benchmarks

Written by \`npm run bench\` (which builds first, then runs \`node dist/bench/run.js\`) on
${new Date().toISOString().slice(0, 10)}. Every figure below comes from the same run on this machine:

${machineDescription().join('\n')}

Each benchmark starts its own Mosquitto on a free loopback port (aedes in-process when Mosquitto
is not installed). Run one alone with \`npm run bench -- <name>\` (names: flush, press); that prints
its figures without rewriting this file.

${sections.join('\n')}`;
  writeFileSync(join(ROOT, 'docs', 'BENCHMARKS.md'), text);
  log('wrote docs/BENCHMARKS.md');
} else {
  process.stdout.write(sections.join('\n'));
}
