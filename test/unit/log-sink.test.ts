import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { StreamLogSink, streamLogSink } from '../../agent/platform/log-sink.js';
import { Recorder, StalledPipe } from '../helpers/streams.js';

const line = (n: number): string => `${JSON.stringify({ level: 'info', n, msg: 'x'.repeat(80) })}\n`;

describe('log lines to a pipe whose reader stops', () => {
  it('queues at most the bound, counts what it drops, and says how many as soon as the reader catches up', async () => {
    const out = new StalledPipe({ highWaterMark: 1 });
    const sink = streamLogSink(out, { maxQueuedBytes: 1000, now: () => new Date('2026-11-26T10:00:00.000Z') });
    for (let i = 0; i < 100; i++) sink.write(line(i));
    expect(out.writableLength).toBeLessThan(1000 + line(99).length);
    const dropped = sink.droppedLines;
    expect(dropped).toBeGreaterThan(80);

    // The reader catches up (one queued chunk at a time): the count follows the last queued line,
    // and what `run` awaits before exiting resolves.
    let flushed = false;
    const waiting = sink.flushed().then(() => (flushed = true));
    await Promise.resolve();
    expect(flushed).toBe(false);
    while (out.writableLength > 0) out.drain();
    await waiting;
    const report = JSON.parse(out.written.at(-1) ?? '') as Record<string, unknown>;
    expect(report).toEqual({ level: 'warn', time: '2026-11-26T10:00:00.000Z', component: 'logger', dropped, msg: 'log lines dropped: the log reader fell behind' });
    // Every line is either written whole, in order, or counted.
    const kept = out.written.slice(0, -1).map((l) => (JSON.parse(l) as { n: number }).n);
    expect(kept).toEqual([...Array(kept.length).keys()]);
    expect(kept.length + dropped).toBe(100);
    expect(sink.droppedLines).toBe(0);

    sink.write(line(100));
    out.drain();
    expect(JSON.parse(out.written.at(-1) ?? '')).toMatchObject({ n: 100 });
  });

  it('reports drops with the next line that fits when the queue never empties', () => {
    const out = new StalledPipe({ highWaterMark: 1 });
    const sink = new StreamLogSink(out, { maxQueuedBytes: 1000, now: () => new Date('2026-11-26T10:00:00.000Z') });
    for (let i = 0; i < 20; i++) sink.write(line(i));
    const dropped = sink.droppedLines;
    expect(dropped).toBeGreaterThan(0);
    out.drain(); // one chunk read: room for a line, the queue not empty
    expect(out.writableLength).toBeGreaterThan(0);
    sink.write(line(20));
    while (out.writableLength > 0) out.drain();
    const tail = out.written.slice(-2).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(tail[0]).toMatchObject({ level: 'warn', dropped });
    expect(tail[1]).toMatchObject({ n: 20 });
  });

  it('waits at exit for a line still being written, however short the queue', async () => {
    // The default high-water mark (16 KiB): one line never makes the stream want a drain.
    const out = new StalledPipe();
    const sink = streamLogSink(out);
    sink.write(line(1));
    let flushed = false;
    const waiting = sink.flushed().then(() => (flushed = true));
    await new Promise((r) => setImmediate(r));
    expect(flushed).toBe(false);
    while (out.writableLength > 0 || !flushed) {
      out.drain();
      await new Promise((r) => setImmediate(r));
    }
    await waiting;
    expect(out.written[0]).toBe(line(1));
  });

  it('survives a failed stream (EPIPE, ENOSPC): the error is taken, later lines are dropped, nothing throws or waits', () => {
    const out = new Writable({ write: (_c, _e, done) => done(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' })) });
    const sink = streamLogSink(out);
    sink.write(line(1));
    return new Promise<void>((resolve) =>
      setImmediate(() => {
        sink.write(line(2));
        sink.write(line(3));
        expect(sink.droppedLines).toBe(2);
        // Nothing to wait for at exit: the stream is gone.
        void sink.flushed().then(resolve);
      }),
    );
  });
});

describe('a log stream that fails, and a new one later', () => {
  const failing = (): Writable => new Writable({ write: (_c, _e, done) => done(Object.assign(new Error('write ENOSPC'), { code: 'ENOSPC' })) });
  const tick = (): Promise<void> => new Promise((r) => setImmediate(r));
  // Only the retry's timer is faked: the streams' errors still come on the next tick.
  beforeEach(() => void vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] }));
  afterEach(() => void vi.useRealTimers());

  it('drops lines while it is failed, then writes to a new stream, the count first', async () => {
    const next = new Recorder();
    let opened = 0;
    const sink = streamLogSink(failing(), { reopen: () => (opened++, next), retryMs: 5000, now: () => new Date('2026-11-26T10:00:00.000Z') });
    sink.write(line(1));
    await tick(); // the write's error
    sink.write(line(2));
    sink.write(line(3));
    expect(sink.droppedLines).toBe(2);
    vi.advanceTimersByTime(4999);
    expect(opened).toBe(0);
    vi.advanceTimersByTime(1);
    expect(opened).toBe(1);
    sink.write(line(4));
    expect(next.writes.map((w) => JSON.parse(w) as Record<string, unknown>)).toEqual([
      { level: 'warn', time: '2026-11-26T10:00:00.000Z', component: 'logger', dropped: 2, msg: 'log lines dropped: writing them failed (a full disk?); written again since' },
      JSON.parse(line(4)),
    ]);
    sink.close();
  });

  it('keeps trying while the new stream fails too, and keeps the count', async () => {
    const last = new Recorder();
    const streams = [failing(), last];
    const sink = streamLogSink(failing(), { reopen: () => streams.shift() as Writable, retryMs: 1000 });
    sink.write(line(1));
    await tick();
    sink.write(line(2));
    vi.advanceTimersByTime(1000); // the second stream: it fails the count's write
    await tick();
    sink.write(line(3));
    vi.advanceTimersByTime(1000);
    expect(last.writes.map((w) => (JSON.parse(w) as { dropped?: number }).dropped)).toEqual([2]);
    sink.close();
  });

  it('does not try again when the one stream there is has failed (a pipe whose reader is gone)', async () => {
    const out = failing();
    let opened = 0;
    const sink = streamLogSink(out, { reopen: () => (opened++, out), retryMs: 1000 });
    sink.write(line(1));
    await tick();
    vi.advanceTimersByTime(10_000);
    expect(opened).toBe(1);
    sink.write(line(2));
    expect(sink.droppedLines).toBe(1);
  });
});
