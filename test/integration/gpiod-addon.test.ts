import { spawnSync } from 'node:child_process';
import { closeSync, constants, existsSync, mkdtempSync, openSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { addonPath, loadGpiodBinding, type LineEvent } from '../../agent/gpio/gpiod-binding.js';
import { describeWith } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';

/** struct gpio_v2_line_event: timestamp_ns u64, id u32 (1 rising, 2 falling), offset, seqno, line_seqno, 6 padding u32. */
function lineEvent(timestampNs: bigint, rising: boolean, seqno: number): Buffer {
  const b = Buffer.alloc(48);
  b.writeBigUInt64LE(timestampNs, 0);
  b.writeUInt32LE(rising ? 1 : 2, 8);
  b.writeUInt32LE(17, 12);
  b.writeUInt32LE(seqno, 16);
  b.writeUInt32LE(seqno, 20);
  return b;
}

describeWith('gpiod addon', 'the gpiod addon (native/gpiod/chair_gpiod.c), built for this machine', () => {
  it('is built by npm run build and loads under this runtime', () => {
    expect(existsSync(addonPath() ?? ''), `missing ${addonPath()}: npm run build (needs a C compiler)`).toBe(true);
    expect(Object.keys(loadGpiodBinding()).sort()).toEqual(['chipInfo', 'getValue', 'lineInfo', 'release', 'request', 'setValue', 'unwatch', 'watch']);
  });

  it('reports what the kernel says as errno codes', () => {
    const g = loadGpiodBinding();
    expect(() => g.chipInfo('/nonexistent/gpiochip0')).toThrow(expect.objectContaining({ code: 'ENOENT' }));
    expect(() => g.chipInfo('/dev/null')).toThrow(expect.objectContaining({ code: 'ENOTTY', message: 'cannot read the chip info of /dev/null: Inappropriate ioctl for device' }));
    expect(() => g.request('/dev/null', 17, { consumer: 'chair-agent', direction: 'input' })).toThrow(expect.objectContaining({ code: 'ENOTTY' }));
  });

  it('delivers the kernel\'s edge events on the event loop, and stops on unwatch', async () => {
    const g = loadGpiodBinding();
    const fifo = join(mkdtempSync(join(tmpdir(), 'gpiod-')), 'events');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const fd = openSync(fifo, constants.O_RDWR | constants.O_NONBLOCK);
    const got: LineEvent[] = [];
    const watcher = g.watch(fd, (events) => got.push(...events));
    writeSync(fd, Buffer.concat([lineEvent(5_000_000_000n, true, 1), lineEvent(5_400_000_000n, false, 2)]));
    await waitFor(() => got.length === 2, 'two events');
    expect(got).toEqual([
      { rising: true, timestampMs: 5000, seqno: 1 },
      { rising: false, timestampMs: 5400, seqno: 2 },
    ]);
    g.unwatch(watcher);
    writeSync(fd, lineEvent(6_000_000_000n, true, 3));
    await new Promise((r) => setImmediate(r));
    expect(got).toHaveLength(2);
    closeSync(fd);
  });

  it('reports a line whose events end (the chip went away) once, with the events read before, and stops', async () => {
    const g = loadGpiodBinding();
    const fifo = join(mkdtempSync(join(tmpdir(), 'gpiod-')), 'events');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const fd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const writer = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
    const calls: { events: LineEvent[]; code: string | undefined }[] = [];
    g.watch(fd, (events, error) => calls.push({ events, code: error?.code }));
    writeSync(writer, lineEvent(7_000_000_000n, true, 9));
    // The writer goes: the reader sees end of file, as a line's fd does when its chip is unbound.
    closeSync(writer);
    await waitFor(() => calls.some((c) => c.code !== undefined), 'the failure reported');
    expect(calls.flatMap((c) => c.events)).toEqual([{ rising: true, timestampMs: 7000, seqno: 9 }]);
    expect(calls.filter((c) => c.code !== undefined)).toEqual([{ events: expect.any(Array), code: 'ENODEV' }]);
    // The fd stays readable (end of file): a poll still running would fire at each turn of the loop.
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(calls.filter((c) => c.code !== undefined)).toHaveLength(1);
    closeSync(fd);
  });

  it('refuses to watch what is not a descriptor, and says when releasing one fails', () => {
    const g = loadGpiodBinding();
    expect(() => g.watch(-1, () => undefined)).toThrow(expect.objectContaining({ code: 'EBADF' }));
    const fd = openSync('/dev/null', constants.O_RDONLY);
    g.release(fd);
    expect(() => g.release(fd)).toThrow(expect.objectContaining({ code: 'EBADF', message: 'cannot release a line: Bad file descriptor' }));
  });
});
