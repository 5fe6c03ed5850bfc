import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { listenOnSteadyPort } from '../platform/steady-port.js';

interface AedesInstance {
  handle: (socket: Socket) => void;
  close(cb: () => void): void;
}

/**
 * A real MQTT broker in this process (aedes; MQTT 3.1.1) on loopback. It can be taken down and
 * brought back on the same port, keeping its retained messages, like a restarted Mosquitto
 * with persistence.
 */
export class EmbeddedBroker {
  private aedes: AedesInstance | null = null;
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  port = 0;

  async start(port = 0): Promise<void> {
    if (!this.aedes) {
      const { Aedes } = (await import('aedes')) as unknown as { Aedes: { createBroker(): Promise<AedesInstance> } };
      this.aedes = await Aedes.createBroker();
    }
    const aedes = this.aedes;
    const server = createServer((socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      aedes.handle(socket);
    });
    const again = port || this.port;
    if (again) {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(again, '127.0.0.1', () => resolve());
      });
    } else {
      // A port the agent's reconnects cannot take while the broker is down ('b' in the demo).
      await listenOnSteadyPort(server);
    }
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  get url(): string {
    return `mqtt://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.server !== null;
  }

  /** Stops listening and drops every client: to them the broker is gone. */
  async down(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const s of this.sockets) s.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  async close(): Promise<void> {
    await this.down();
    const aedes = this.aedes;
    this.aedes = null;
    if (aedes) await new Promise<void>((resolve) => aedes.close(() => resolve()));
  }
}
