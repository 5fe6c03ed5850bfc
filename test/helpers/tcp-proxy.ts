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
      client.on('data', (d) => upstream.write(d));
      upstream.on('data', (d) => {
        if (!this.swallowReplies) client.write(d);
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
