import { describe, expect, it } from 'vitest';
import type { Packet } from 'mqtt-packet';
import { PacketStore } from '../../agent/mqtt/packet-store.js';

const publish = (messageId: number): Packet => ({ cmd: 'publish', topic: `t/${messageId}`, payload: 'x', qos: 1, retain: false, dup: false, messageId });

function found(store: PacketStore, messageId: number, op: 'get' | 'del'): Packet | Error | undefined {
  let out: Packet | Error | undefined;
  store[op]({ messageId }, (err, packet) => (out = err ?? packet));
  return out;
}

async function streamed(store: PacketStore): Promise<(number | undefined)[]> {
  const ids: (number | undefined)[] = [];
  for await (const p of store.createStream() as AsyncIterable<Packet>) ids.push(p.messageId);
  return ids;
}

describe("mqtt.js's outgoing store (publishes awaiting PUBACK)", () => {
  it('gives a packet back by its id until its PUBACK removes it, and says when one is missing', () => {
    const store = new PacketStore();
    let put = false;
    store.put(publish(7), () => (put = true));
    expect(put).toBe(true);
    expect((found(store, 7, 'get') as Packet).messageId).toBe(7);
    expect((found(store, 7, 'del') as Packet).messageId).toBe(7);
    expect(found(store, 7, 'get')).toBeInstanceOf(Error);
    expect(found(store, 7, 'del')).toBeInstanceOf(Error);
  });

  it('streams what is waiting in the order it was sent, across the wrap of packet ids', async () => {
    const store = new PacketStore();
    for (const id of [65_534, 65_535, 1, 2, 3]) store.put(publish(id), () => undefined);
    found(store, 1, 'del');
    expect(await streamed(store)).toEqual([65_534, 65_535, 2, 3]);
    store.close(() => undefined);
    expect(await streamed(store)).toEqual([]);
  });
});
