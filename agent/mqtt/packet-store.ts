import { Readable } from 'node:stream';
import type { IStore } from 'mqtt';
import type { Packet } from 'mqtt-packet';
import { IntMap } from '../platform/int-map.js';

interface Stored {
  packet: Packet;
  /** When it was put, for giving them back in the order they were sent. */
  order: number;
}

/**
 * mqtt.js's outgoing store, the publishes awaiting their PUBACK, by packet id. mqtt.js's own
 * keeps them in a Map, which a flush fills and empties thousands of times a second: once the
 * Map's table was in the old generation, every payload was held from there until V8's next full
 * collection (see IntMap). This is the same store without the Map. Each client gets its own.
 */
export class PacketStore implements IStore {
  private packets = new IntMap<Stored>();
  private puts = 0;

  put(packet: Packet, cb: (error?: Error) => void): this {
    this.packets.set(packet.messageId ?? 0, { packet, order: this.puts++ });
    cb?.();
    return this;
  }

  /** What is stored, in the order it was put (mqtt.js sends it again after a reconnect). */
  createStream(): ReturnType<IStore['createStream']> {
    const stored: Stored[] = [];
    this.packets.forEach((s) => stored.push(s));
    stored.sort((a, b) => a.order - b.order);
    // mqtt.js types this as readable-stream's Readable; it reads it with read(), once() and destroy(), which Node's has.
    return Readable.from(
      stored.map((s) => s.packet),
      { objectMode: true },
    ) as unknown as ReturnType<IStore['createStream']>;
  }

  del(packet: Pick<Packet, 'messageId'>, cb: (error?: Error, packet?: Packet) => void): this {
    const id = packet.messageId ?? 0;
    const stored = this.packets.get(id);
    if (stored) {
      this.packets.delete(id);
      cb(undefined, stored.packet);
    } else cb?.(new Error('missing packet'));
    return this;
  }

  get(packet: Pick<Packet, 'messageId'>, cb: (error?: Error, packet?: Packet) => void): this {
    const stored = this.packets.get(packet.messageId ?? 0);
    if (stored) cb(undefined, stored.packet);
    else cb?.(new Error('missing packet'));
    return this;
  }

  close(cb: (error?: Error) => void): void {
    this.packets = new IntMap<Stored>();
    cb?.();
  }
}
