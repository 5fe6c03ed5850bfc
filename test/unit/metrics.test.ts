import { describe, expect, it } from 'vitest';
import { Metrics } from '../../agent/observe/metrics.js';

describe('the /metrics text', () => {
  it('has counters with their labels, escaped, and histograms with cumulative buckets', async () => {
    const m = new Metrics({ defaultMetrics: false });
    m.vendorRequests.inc({ endpoint: 'lists', outcome: '200' });
    m.vendorRequests.inc({ endpoint: 'lists', outcome: '200' });
    m.syncRecords.inc({ outcome: 'new' }, 5);
    m.refused.inc({ what: 'start', status: 'bad "quote"\\\n' });
    m.vendorDuration.observe({ endpoint: 'lists' }, 0.07);
    m.vendorDuration.observe({ endpoint: 'lists' }, 3);
    m.gauge('chair_agent_up', 'Always 1', () => 1);
    m.gauge('chair_agent_unknown', 'Not known yet', () => null);
    m.labelledGauge('chair_agent_chair_online', 'Online', 'device_id', () => [['MC1', 1], ['MC2', 0]]);
    const text = await m.text();
    expect(text).toMatch(/^# TYPE chair_agent_vendor_requests_total counter$/m);
    expect(text).toMatch(/^chair_agent_vendor_requests_total\{endpoint="lists",outcome="200"\} 2$/m);
    expect(text).toMatch(/^chair_agent_sync_records_total\{outcome="new"\} 5$/m);
    expect(text).toContain('chair_agent_refused_requests_total{what="start",status="bad \\"quote\\"\\\\\\n"} 1');
    expect(text).toMatch(/^chair_agent_outbox_parked_total 0$/m);
    expect(text).toMatch(/^chair_agent_vendor_request_duration_seconds_bucket\{endpoint="lists",le="0.05"\} 0$/m);
    expect(text).toMatch(/^chair_agent_vendor_request_duration_seconds_bucket\{endpoint="lists",le="0.1"\} 1$/m);
    expect(text).toMatch(/^chair_agent_vendor_request_duration_seconds_bucket\{endpoint="lists",le="5"\} 2$/m);
    expect(text).toMatch(/^chair_agent_vendor_request_duration_seconds_bucket\{endpoint="lists",le="\+Inf"\} 2$/m);
    expect(text).toMatch(/^chair_agent_vendor_request_duration_seconds_count\{endpoint="lists"\} 2$/m);
    expect(text).toMatch(/^chair_agent_up 1$/m);
    expect(text).not.toMatch(/^chair_agent_unknown /m);
    expect(text).toMatch(/^chair_agent_chair_online\{device_id="MC2"\} 0$/m);
    expect(m.contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
  });

  it('has the process figures an operator graphs, event loop lag from the second scrape on', async () => {
    const m = new Metrics();
    const first = await m.text();
    expect(first).toMatch(/^process_resident_memory_bytes \d+$/m);
    expect(first).toMatch(/^process_cpu_seconds_total [\d.e-]+$/m);
    expect(first).toMatch(/^nodejs_version_info\{version="v\d+\.\d+\.\d+",major="\d+",minor="\d+",patch="\d+"\} 1$/m);
    expect(first).not.toMatch(/^nodejs_eventloop_lag_max_seconds /m);
    // The sampler's first sample comes after its first period.
    let text = '';
    for (let tries = 0; tries < 50 && !/^nodejs_eventloop_lag_max_seconds /m.test(text); tries++) {
      await new Promise((r) => setTimeout(r, 100));
      text = await m.text();
    }
    expect(text).toMatch(/^nodejs_eventloop_lag_max_seconds [\d.e-]+$/m);
    m.close();
  });

  it('reads lag as lag: about 0 on an idle loop, the block on a blocked one', async () => {
    const m = new Metrics();
    await m.text();
    const read = (text: string, name: string): number => Number(new RegExp(`^${name} ([\\d.e-]+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
    let text = '';
    for (let tries = 0; tries < 50 && !/^nodejs_eventloop_lag_p99_seconds /m.test(text); tries++) {
      await new Promise((r) => setTimeout(r, 100));
      text = await m.text();
    }
    // An idle loop reads far below the old 1.0 s (the sampling period, which is not lag); the
    // margin allows for a busy CI machine.
    await new Promise((r) => setTimeout(r, 200));
    text = await m.text();
    expect(read(text, 'nodejs_eventloop_lag_p99_seconds')).toBeLessThan(0.25);
    // A loop blocked for 300 ms shows it (the block starts after the sampler's first tick since
    // the scrape: the histogram's reset forgets the interval under way).
    await new Promise((r) => setTimeout(r, 50));
    const until = performance.now() + 300;
    while (performance.now() < until) {
      // busy: the event loop cannot run
    }
    await new Promise((r) => setTimeout(r, 100));
    text = await m.text();
    expect(read(text, 'nodejs_eventloop_lag_max_seconds')).toBeGreaterThan(0.2);
    m.close();
  });
});
