import type { Socket } from 'node:net';

/** What a connection is doing, as far as the listener knows. */
export type ConnectionUse = 'silent' | 'idle' | 'webhook' | 'stream' | 'other';

/** Told when a connection it admitted is closed to make room, with what it was doing. */
export type OnEvict = (remote: string, use: ConnectionUse) => void;

interface Tracked {
  socket: Socket;
  remote: string;
  endpoint: string;
  openedAt: number;
  use: ConnectionUse;
  onEvict: OnEvict | undefined;
}

export interface AdmissionOptions {
  /** Connections open at once before others are made to give way (http.maxConnections). */
  soft: number;
  /** Connections open at once, ever: past it a new one is refused unless another can give way. */
  hard: number;
  /** Connections from one address at once. */
  perClient: number;
  /** A connection that has sent no request this long may give way to a new one. */
  silentGraceMs: number;
  now: () => number;
}

/** Which connections give way first: the ones doing least for anyone. Webhooks never do. */
const EVICTION_ORDER: ConnectionUse[] = ['silent', 'idle', 'stream', 'other'];

/**
 * Decides who gets a connection when there are too many, so the webhook always gets one:
 * instead of refusing new connections at a fixed cap (a TCP reset for a vendor's webhook when
 * viewers, idle keep-alives or a client holding silent sockets fill the slots), every connection
 * is accepted up to a hard cap, and past the soft cap the ones doing least (silent for a while,
 * then idle keep-alives, then status-page streams, then other requests) are closed to make room.
 * A request other than the webhook is shed with 503 and Retry-After while over the soft cap
 * (HttpListener). Past `perClient` connections from one address, that address's own quietest
 * connection makes room first, so a single client mostly competes with itself.
 *
 * One table holds every listener's connections (`connectionTable`): `http.maxConnections` is what
 * the box holds open, not what each port does.
 */
export class Admission {
  private readonly open = new Map<Socket, Tracked>();
  private readonly byRemote = new Map<string, number>();
  /**
   * The tracked connection by its peer's address and port. Behind TLS a request's socket is the
   * TLS socket wrapped around the TCP connection admitted here: the same peer, another object.
   */
  private readonly byEndpoint = new Map<string, Socket>();

  constructor(private readonly opts: AdmissionOptions) {}

  get size(): number {
    return this.open.size;
  }

  get overSoft(): boolean {
    return this.open.size > this.opts.soft;
  }

  /**
   * A new connection: true to keep it, false when it must be closed (it is then not tracked).
   * `onEvict` is told if it is closed later to make room.
   */
  admit(socket: Socket, onEvict?: OnEvict): boolean {
    const remote = socket.remoteAddress ?? '?';
    const mine = this.byRemote.get(remote) ?? 0;
    // Past its share, a client's own quietest connection makes room (never a webhook in flight).
    if (mine >= this.opts.perClient) this.evict((t) => t.remote === remote);
    if (this.open.size >= this.opts.hard && !this.evict(() => true) && !this.evictHeaviestSilent()) return false;
    if (this.open.size >= this.opts.soft) this.evict((t) => t.use === 'silent' || t.use === 'idle', true);
    const key = endpoint(socket);
    this.open.set(socket, { socket, remote, endpoint: key, openedAt: this.opts.now(), use: 'silent', onEvict });
    this.byEndpoint.set(key, socket);
    this.byRemote.set(remote, (this.byRemote.get(remote) ?? 0) + 1);
    socket.once('close', () => this.forget(socket));
    return true;
  }

  /** What a connection is used for now (a request arrived, or its answer was sent). */
  mark(socket: Socket, use: ConnectionUse): void {
    const admitted = this.open.has(socket) ? socket : this.byEndpoint.get(endpoint(socket));
    const t = admitted && this.open.get(admitted);
    if (t) t.use = use;
  }

  count(use: ConnectionUse): number {
    let n = 0;
    for (const t of this.open.values()) if (t.use === use) n += 1;
    return n;
  }

  /** Closes the connection doing least among those `which` picks; false when none may go. */
  private evict(which: (t: Tracked) => boolean, onlyQuiet = false): boolean {
    const now = this.opts.now();
    for (const use of EVICTION_ORDER) {
      if (onlyQuiet && use !== 'silent' && use !== 'idle') break;
      let oldest: Tracked | null = null;
      for (const t of this.open.values()) {
        if (t.use !== use || !which(t)) continue;
        // A connection just opened has had no chance to send its request yet.
        if (use === 'silent' && now - t.openedAt < this.opts.silentGraceMs) continue;
        if (!oldest || t.openedAt < oldest.openedAt) oldest = t;
      }
      if (oldest) {
        this.close(oldest);
        return true;
      }
    }
    return false;
  }

  /**
   * The table is full of connections too young to have been silent for long (a client opening
   * them as fast as they close): the address holding the most gives up its oldest silent one,
   * rather than a newcomer (a vendor's webhook) being refused.
   */
  private evictHeaviestSilent(): boolean {
    let heaviest: string | null = null;
    for (const [remote, n] of this.byRemote) if (heaviest === null || n > (this.byRemote.get(heaviest) ?? 0)) heaviest = remote;
    let oldest: Tracked | null = null;
    for (const t of this.open.values()) if (t.remote === heaviest && t.use === 'silent' && (!oldest || t.openedAt < oldest.openedAt)) oldest = t;
    if (!oldest) return false;
    this.close(oldest);
    return true;
  }

  private close(t: Tracked): void {
    this.forget(t.socket);
    t.socket.destroy();
    t.onEvict?.(t.remote, t.use);
  }

  private forget(socket: Socket): void {
    const t = this.open.get(socket);
    if (!t) return;
    this.open.delete(socket);
    if (this.byEndpoint.get(t.endpoint) === socket) this.byEndpoint.delete(t.endpoint);
    const n = (this.byRemote.get(t.remote) ?? 1) - 1;
    if (n > 0) this.byRemote.set(t.remote, n);
    else this.byRemote.delete(t.remote);
  }
}

/** A connection by both its ends: one peer port may reach two listeners. */
function endpoint(socket: Socket): string {
  return `${socket.remoteAddress ?? '?'}|${socket.remotePort ?? '?'}|${socket.localPort ?? '?'}`;
}

/**
 * The connection table `http.maxConnections` bounds: connections past it make the quietest give
 * way, four times it is the hard limit. A client sends its request right after connecting; one
 * silent for half a second may give way to a new connection when the table is full.
 */
export function connectionTable(maxConnections: number, now: () => number): Admission {
  return new Admission({ soft: maxConnections, hard: maxConnections * 4, perClient: Math.max(8, maxConnections), silentGraceMs: 500, now });
}
