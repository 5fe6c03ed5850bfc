import { readFileSync } from 'node:fs';
import type { Server } from 'node:net';

/** The first port of the kernel's ephemeral range (Linux), where outgoing connections get theirs. */
function ephemeralLow(): number | null {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 11_024 ? low : null;
  } catch {
    return null;
  }
}

function tryListen(server: Server, port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const onError = (): void => resolve(false);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve(true);
    });
  });
}

/**
 * Listens `server` on a loopback port below the kernel's ephemeral range and returns it. A port
 * from that range, which is what port 0 gives, can be handed to any outgoing connection as its
 * local port while nothing listens there (a client retrying towards a server that is down among
 * them), and the server listening on it again then fails with EADDRINUSE. Below the range only a
 * listener can hold a port, so a server that stops and comes back gets its port back. Where the
 * range cannot be read, or 50 tries find nothing free, the kernel's choice.
 */
export async function listenOnSteadyPort(server: Server, host = '127.0.0.1'): Promise<number> {
  const low = ephemeralLow();
  let listening = false;
  for (let i = 0; low !== null && i < 50 && !listening; i++) {
    listening = await tryListen(server, 10_000 + Math.floor(Math.random() * (low - 10_000)), host);
  }
  if (!listening && !(await tryListen(server, 0, host))) throw new Error(`no free port on ${host}`);
  const addr = server.address();
  if (!addr || typeof addr !== 'object') throw new Error(`no port on ${host}`);
  return addr.port;
}
