import { connect, createServer } from 'node:net';
import { listenOnSteadyPort } from '../../agent/platform/steady-port.js';

/** A loopback port nothing listens on, below the kernel's ephemeral range (steady-port.ts says why). */
export async function freePort(): Promise<number> {
  const srv = createServer();
  const port = await listenOnSteadyPort(srv);
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

/** Resolves once something accepts TCP connections on the port. */
export async function waitForPort(port: number, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (performance.now() > deadline) throw new Error(`nothing listens on port ${port} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
