import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Server } from 'node:net';
import { join } from 'node:path';
import { createServer as createTlsServer } from 'node:tls';
import { track } from './agent-process.js';
import { freePort, waitForPort } from './ports.js';

/**
 * The proxies sites put between the box and the internet, as Debian packages them: tinyproxy,
 * microsocks (SOCKS5), and squid with Debian's own access rules (squid-openssl for TLS
 * inspection). Each runs in the foreground with its files in the test's directory, which must be
 * writable by squid's own user when the tests run as root.
 */
export interface SiteProxy {
  port: number;
  url: string;
  /** What the proxy logged so far: tinyproxy's output, squid's access log (written as a tunnel ends). */
  log: () => string;
  child: ChildProcess;
}

/** A proxy in the foreground, its output kept as its log, once it listens on its port. */
async function foreground(bin: string, args: string[], port: number, url: string): Promise<SiteProxy> {
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  track(child);
  let log = '';
  child.stdout?.on('data', (d: Buffer) => (log += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (log += d.toString()));
  await waitForPort(port);
  return { port, url, log: () => log, child };
}

export async function startTinyproxy(dir: string, name: string, extra = ''): Promise<SiteProxy> {
  const port = await freePort();
  const conf = join(dir, `${name}.conf`);
  writeFileSync(conf, `Port ${port}\nListen 127.0.0.1\nTimeout 30\nAllow 127.0.0.1\nLogLevel Info\nMaxClients 20\n${extra}`);
  return foreground('tinyproxy', ['-d', '-c', conf], port, `http://127.0.0.1:${port}`);
}

/** microsocks, Debian's small SOCKS5 server, with a login when given one (RFC 1929). */
export async function startMicrosocks(login?: { user: string; password: string }): Promise<SiteProxy> {
  const port = await freePort();
  return foreground('microsocks', ['-i', '127.0.0.1', '-p', String(port), ...(login ? ['-u', login.user, '-P', login.password] : [])], port, `socks5://127.0.0.1:${port}`);
}

export interface SquidOptions {
  /** Ports CONNECT may reach besides 443 (Debian's SSL_ports), as a site's admin adds them. */
  sslPorts?: (number | string)[];
  /** Options of its http_port (ssl-bump ...). */
  portOptions?: string;
  /** Access rules of the site's own, before localhost is allowed (a denied path, say). */
  access?: string[];
  /** More lines after the access rules (ssl_bump ...). */
  extra?: string[];
}

/** squids this process started: each gets a service name of its own. */
let squids = 0;

function removeSegments(which: (name: string) => boolean): void {
  let names: string[] = [];
  try {
    names = readdirSync('/dev/shm');
  } catch {
    return;
  }
  for (const n of names.filter(which)) rmSync(join('/dev/shm', n), { force: true });
}

/**
 * The segments of squids whose test process has gone (a worker ended before its squid's exit
 * was seen): their names carry that process's pid.
 */
function sweepSegments(): void {
  removeSegments((n) => {
    const pid = /^chairagent(\d+)n\d+-/.exec(n)?.[1];
    if (pid === undefined) return false;
    try {
      process.kill(Number(pid), 0);
      return false;
    } catch (err) {
      return (err as { code?: string }).code === 'ESRCH';
    }
  });
}

/** squid with Debian's access rules: CONNECT to SSL_ports only, which is 443 unless told more. */
export async function startSquid(dir: string, name: string, o: SquidOptions = {}): Promise<SiteProxy> {
  const port = await freePort();
  const conf = join(dir, `${name}.conf`);
  const access = join(dir, `${name}-access.log`);
  writeFileSync(
    conf,
    [
      'acl SSL_ports port 443',
      ...(o.sslPorts ?? []).map((p) => `acl SSL_ports port ${p}`),
      'acl Safe_ports port 80',
      'acl Safe_ports port 443',
      'acl Safe_ports port 1025-65535',
      'http_access deny !Safe_ports',
      'http_access deny CONNECT !SSL_ports',
      ...(o.access ?? []),
      'http_access allow localhost',
      'http_access deny all',
      `http_port 127.0.0.1:${port}${o.portOptions ? ` ${o.portOptions}` : ''}`,
      ...(o.extra ?? []),
      `pid_filename ${join(dir, `${name}.pid`)}`,
      `cache_log ${join(dir, `${name}-cache.log`)}`,
      `access_log stdio:${access}`,
      'cache deny all',
      'pinger_enable off',
      'shutdown_lifetime 0 seconds',
      '',
    ].join('\n'),
  );
  const bin = spawnSync('sh', ['-c', 'command -v squid']).stdout?.toString().trim() || '/usr/sbin/squid';
  // A service name of its own: squid names its shared memory (/dev/shm/<name>-*) after it, and a
  // second squid under the default name, or one run by another user, fails "File exists".
  const service = `chairagent${process.pid}n${(squids += 1)}`;
  sweepSegments();
  const child = spawn(bin, ['-N', '-n', service, '-f', conf], { stdio: 'ignore' });
  track(child);
  // Killed, it leaves its segments behind (2 MB each squid).
  child.once('exit', () => removeSegments((n) => n.startsWith(`${service}-`)));
  await waitForPort(port);
  const log = (): string => {
    try {
      return readFileSync(access, 'utf8');
    } catch {
      return '';
    }
  };
  return { port, url: `http://127.0.0.1:${port}`, log, child };
}

/**
 * TLS in front of a plain TCP port on loopback (a vendor's HTTPS, a proxy's TLS port), as stunnel
 * serves it, on 127.0.0.1 and, where there is one, on ::1 at the same port: squid 6 reaches
 * `localhost` at ::1. `server.close()` closes both.
 */
export async function tlsFront(certFile: string, keyFile: string, targetPort: number): Promise<{ server: Server; port: number }> {
  const make = (): Server =>
    createTlsServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, (tls) => {
      const upstream = connect(targetPort, '127.0.0.1');
      tls.pipe(upstream).pipe(tls);
      const end = (): void => void (tls.destroy(), upstream.destroy());
      tls.on('error', end);
      upstream.on('error', end);
    });
  const server = make();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  const v6 = make();
  const bound = await new Promise<boolean>((r) => {
    v6.once('error', () => r(false));
    v6.listen(port, '::1', () => r(true));
  });
  if (bound) {
    const close = server.close.bind(server);
    server.close = ((cb?: (err?: Error) => void) => {
      v6.close();
      return close(cb);
    }) as typeof server.close;
  }
  return { server, port };
}
