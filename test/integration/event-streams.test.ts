import { createServer, get, type Server } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../agent/platform/clock.js';
import { EventStreams, type EventStreamLimits } from '../../agent/http/event-streams.js';
import { waitFor } from '../helpers/wait.js';

const LIMITS: EventStreamLimits = { max: 16, perClient: 4, lifetimeMs: 60_000, maxBacklogBytes: 256 * 1024 };

let server: Server | null = null;
afterEach(async () => {
  const s = server;
  server = null;
  if (!s) return;
  const closed = new Promise<void>((resolve) => s.close(() => resolve()));
  s.closeAllConnections();
  await closed;
});

/** A real HTTP server on loopback whose every request opens a stream. */
async function serve(limits: EventStreamLimits): Promise<{ streams: EventStreams; port: number; dropped: string[] }> {
  const dropped: string[] = [];
  const streams = new EventStreams(limits, systemClock, (_remote, why) => dropped.push(why));
  server = createServer((req, res) => void streams.open(req, res, 'retry: 2000\n\n'));
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', () => resolve()));
  return { streams, port: (server.address() as AddressInfo).port, dropped };
}

describe('status-page event streams on real sockets', () => {
  it('drops a reader that never reads once it is 256 KiB behind, and keeps one that reads', async () => {
    const { streams, port, dropped } = await serve(LIMITS);
    // One client sends its request and then never reads a byte.
    const stuck = connect(port, '127.0.0.1');
    stuck.on('error', () => undefined);
    stuck.write('GET /events HTTP/1.1\r\nhost: x\r\n\r\n');
    stuck.pause();
    // Another reads everything, as a browser does.
    let read = 0;
    get({ host: '127.0.0.1', port, path: '/events' }, (res) => res.on('data', (d: Buffer) => (read += d.length)));
    await waitFor(() => streams.size === 2, 'both streams open');
    const chunk = `data: ${'x'.repeat(1024 * 1024)}\n\n`;
    let sent = 0;
    while (streams.size === 2 && sent < 64) {
      streams.broadcast(chunk);
      sent += 1;
      // Let the sockets move what they can, as the event loop would between pushes.
      await new Promise((r) => setImmediate(r));
      await waitFor(() => read >= sent * chunk.length * 0.5 || streams.size < 2, 'the reader keeping up', 15_000);
    }
    expect(streams.size).toBe(1);
    expect(dropped[0]).toMatch(/bytes unsent: the reader does not read/);
    // Kernel buffers took the first megabytes; past them, at most the limit and one push were held.
    expect(sent).toBeLessThan(64);
    stuck.destroy();
  });

  it('answers 503 past the per-address and the total limits, and ends a stream at its lifetime', async () => {
    const { streams, port } = await serve({ ...LIMITS, perClient: 2, lifetimeMs: 300 });
    const status = (): Promise<{ code: number; ended: Promise<void> }> =>
      new Promise((resolve) =>
        get({ host: '127.0.0.1', port, path: '/events' }, (res) => {
          const ended = new Promise<void>((done) => res.on('end', () => done()));
          res.resume();
          resolve({ code: res.statusCode ?? 0, ended });
        }),
      );
    const [a, b, c] = [await status(), await status(), await status()];
    expect([a.code, b.code, c.code]).toEqual([200, 200, 503]);
    // The lifetime ends the open ones; the browser's EventSource would reconnect.
    await a.ended;
    await b.ended;
    await waitFor(() => streams.size === 0, 'no stream left');
  });
});
