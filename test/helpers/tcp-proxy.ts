import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A TCP proxy in front of a broker, to cut the network in ways a test needs: refuse connections
 * (`up = false`), drop everything the broker sends back (`swallowReplies`, so PUBACKs are lost),
 * or cut every connection at once.
 */
export class TcpProxy {
  up = true;
  swallowReplies = false;
  /** Cuts the connection when what the client sends contains this (a broker that drops a client over one message). */
  cutOn: Buffer | null = null;
  /** How many connections were cut that way. */
  cuts = 0;
  /** The broker's PUBACK for a PUBLISH containing this is never passed on (a broker that skips a message). */
  swallowAckOf: Buffer | null = null;
  private readonly swallowed = new Set<number>();
  private server: Server | null = null;
  private readonly pairs = new Set<[Socket, Socket]>();
  port = 0;

  constructor(private readonly targetPort: number) {}

  async start(): Promise<void> {
    this.server = createServer((client) => {
      if (!this.up) {
        client.destroy();
        return;
      }
      const upstream = connect(this.targetPort, '127.0.0.1');
      const pair: [Socket, Socket] = [client, upstream];
      this.pairs.add(pair);
      const close = (): void => {
        client.destroy();
        upstream.destroy();
        this.pairs.delete(pair);
      };
      client.on('data', (d: Buffer) => {
        if (this.cutOn && d.includes(this.cutOn)) {
          this.cuts += 1;
          close();
          return;
        }
        if (this.swallowAckOf && d.includes(this.swallowAckOf)) {
          for (const p of packets(d)) if (p.type === 3 && p.body.includes(this.swallowAckOf)) this.swallowed.add(publishId(p));
        }
        upstream.write(d);
      });
      upstream.on('data', (d: Buffer) => {
        if (this.swallowReplies) return;
        if (this.swallowed.size === 0) return void client.write(d);
        const kept = packets(d).filter((p) => !(p.type === 4 && this.swallowed.has(p.body.readUInt16BE(0))));
        client.write(Buffer.concat(kept.map((p) => p.raw)));
      });
      client.on('error', close).on('close', close);
      upstream.on('error', close).on('close', close);
    });
    await new Promise<void>((r) => this.server?.listen(0, '127.0.0.1', () => r()));
    this.port = (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `mqtt://127.0.0.1:${this.port}`;
  }

  cutAll(): void {
    for (const [a, b] of this.pairs) {
      a.destroy();
      b.destroy();
    }
    this.pairs.clear();
  }

  async stop(): Promise<void> {
    this.cutAll();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

interface Packet {
  type: number;
  flags: number;
  body: Buffer;
  raw: Buffer;
}

/** The MQTT packets of a chunk (enough for a test: a chunk holds whole packets). */
function packets(chunk: Buffer): Packet[] {
  const out: Packet[] = [];
  let i = 0;
  while (i < chunk.length) {
    const start = i;
    const header = chunk[i++] as number;
    let length = 0;
    for (let mult = 1; ; mult *= 128) {
      const b = chunk[i++] as number;
      length += (b & 127) * mult;
      if (!(b & 128)) break;
    }
    out.push({ type: header >> 4, flags: header & 15, body: chunk.subarray(i, i + length), raw: chunk.subarray(start, i + length) });
    i += length;
  }
  return out;
}

/** The packet id of a QoS 1 PUBLISH. */
function publishId(p: Packet): number {
  const topicLength = p.body.readUInt16BE(0);
  return p.body.readUInt16BE(2 + topicLength);
}
