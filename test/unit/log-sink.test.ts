import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { StreamLogSink, streamLogSink } from '../../agent/platform/log-sink.js';

/** A stream whose reader is stalled until `drain()`: everything written stays queued. */
class StalledPipe extends Writable {
  readonly written: string[] = [];
  private pending: (() => void)[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    if (chunk.length > 0) this.written.push(chunk.toString());
    this.pending.push(done);
  }
  drain(): void {
    for (const done of this.pending.splice(0)) done();
  }
}

const line = (n: number): string => `${JSON.stringify({ level: 'info', n, msg: 'x'.repeat(80) })}\n`;

describe('log lines to a pipe whose reader stops', () => {
  it('queues at most the bound, counts what it drops, and says how many as soon as the reader catches up', async () => {
    const out = new StalledPipe({ highWaterMark: 1 });
    const sink = streamLogSink(out, 1000, () => new Date('2026-11-26T10:00:00.000Z'));
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
    const sink = new StreamLogSink(out, 1000, () => new Date('2026-11-26T10:00:00.000Z'));
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
