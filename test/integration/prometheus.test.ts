import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { track } from '../helpers/agent-process.js';
import { freePort, waitForPort } from '../helpers/ports.js';
import { startRig, type Rig } from '../helpers/rig.js';
import { describeWith } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';

/**
 * /metrics as Prometheus itself reads it: Debian's promtool lints the text, and a real
 * Prometheus scrapes the agent and answers queries on the families dashboards use.
 */
let rig: Rig;
beforeAll(async () => {
  rig = await startRig({ site: 'prom' });
});
afterAll(() => rig?.close());

const scrape = async (): Promise<string> => (await fetch(`${rig.base}/metrics`)).text();

describeWith('prometheus', '/metrics against Prometheus', () => {
  it('passes promtool check metrics, with the standard process_* and nodejs_* families', async () => {
    await scrape(); // the first scrape starts the samplers (GC, event-loop delay)
    const text = await scrape();
    const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(`${r.stdout}${r.stderr}`.trim()).toBe('');
    expect(r.status).toBe(0);
    for (const family of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'process_virtual_memory_bytes',
      'process_heap_bytes',
      'process_open_fds',
      'process_max_fds',
      'process_start_time_seconds',
      'nodejs_eventloop_lag_seconds',
      'nodejs_eventloop_lag_p99_seconds',
      'nodejs_heap_size_used_bytes',
      'nodejs_heap_space_size_used_bytes',
      'nodejs_external_memory_bytes',
      'nodejs_active_resources',
      'nodejs_active_handles',
      'nodejs_gc_duration_seconds',
      'nodejs_version_info',
    ]) {
      expect(text, family).toMatch(new RegExp(`^# TYPE ${family} `, 'm'));
    }
  });

  it('is scraped by a real Prometheus, which answers queries on it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'prometheus-'));
    const config = join(dir, 'prometheus.yml');
    writeFileSync(config, `global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: chair-agent\n    static_configs: [{targets: ["127.0.0.1:${rig.agent.http.address().port}"]}]\n`);
    const port = await freePort();
    const prom = track(spawn('prometheus', [`--config.file=${config}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`], { stdio: 'ignore' }));
    try {
      await waitForPort(port, 30_000);
      const query = async (q: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]> => {
        const res = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(q)}`);
        const body = (await res.json()) as { data?: { result?: { metric: Record<string, string>; value: [number, string] }[] } };
        return body.data?.result ?? [];
      };
      await waitFor(async () => (await query('up{job="chair-agent"}'))[0]?.value[1] === '1', 'Prometheus scraping the agent', 30_000);
      expect((await query('chair_agent_up'))[0]?.value[1]).toBe('1');
      await waitFor(async () => (await query('nodejs_heap_space_size_used_bytes')).length > 1, 'heap spaces by label', 15_000);
      const lag = await query('nodejs_eventloop_lag_p99_seconds');
      // Lag, not the sampling period: an idle agent is far below the 1 s the old metric read.
      expect(Number(lag[0]?.value[1] ?? '1')).toBeLessThan(0.5);
    } finally {
      prom.kill('SIGTERM');
    }
  });
});
