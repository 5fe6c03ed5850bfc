import { readFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';

/** The first port of the kernel's ephemeral range (Linux), where outgoing connections get theirs. */
function ephemeralLow(): number | null {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 11_024 ? low : null;
  } catch {
    return null;
  }
}

/** Whether port can be listened on at 127.0.0.1 now; the kernel's choice when port is 0. */
function tryListen(port: number): Promise<number | null> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(null));
    srv.listen(port, '127.0.0.1', () => {
      const addr = srv.address();
      const got = typeof addr === 'object' && addr ? addr.port : null;
      srv.close(() => resolve(got));
    });
  });
}

/**
 * A loopback port nothing listens on, below the kernel's ephemeral range. A port from that range
 * can be handed to any outgoing connection (a client retrying towards a broker that is down
 * among them) as its local port while nothing listens there, and a broker or relay that stops
 * and listens on it again then fails with EADDRINUSE. Below the range only a listener can hold it.
 */
export async function freePort(): Promise<number> {
  const low = ephemeralLow();
  if (low !== null) {
    for (let i = 0; i < 50; i++) {
      const got = await tryListen(10_000 + Math.floor(Math.random() * (low - 10_000)));
      if (got !== null) return got;
    }
  }
  const got = await tryListen(0);
  if (got === null) throw new Error('no free loopback port');
  return got;
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
