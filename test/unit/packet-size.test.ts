import mqttPacket from 'mqtt-packet';
import { describe, expect, it } from 'vitest';
import { overPacketLimit, publishPacketBytes } from '../../agent/mqtt/packet-size.js';

/** The bytes mqtt.js itself would write for this PUBLISH (its encoder, MQTT 5). */
function encoded(topic: string, payload: string, qos: 0 | 1, correlationData?: Buffer): number {
  return mqttPacket.generate({ cmd: 'publish', topic, payload, qos, messageId: qos ? 1 : undefined, retain: false, dup: false, ...(correlationData ? { properties: { correlationData } } : {}) } as mqttPacket.IPublishPacket, { protocolVersion: 5 }).length;
}

describe('PUBLISH packet size, against the encoder mqtt.js sends with', () => {
  it('counts what a broker compares with its Maximum Packet Size, to the byte', () => {
    // Around the lengths where the remaining length takes one more byte (127/128, 16383/16384).
    const lengths = [0, 1, 100, 118, 119, 120, 121, 122, 500, 16_360, 16_371, 16_372, 16_373, 20_000];
    for (const n of lengths)
      for (const qos of [0, 1] as const) {
        const payload = 'x'.repeat(n);
        expect(publishPacketBytes('chair-agent/s/t', payload, qos), `${n} bytes, QoS ${qos}`).toBe(encoded('chair-agent/s/t', payload, qos));
      }
    const multiByte = 'é'.repeat(300) + '漢'.repeat(100);
    expect(publishPacketBytes('t/ü', multiByte)).toBe(encoded('t/ü', multiByte, 1));
    const correlation = Buffer.from('0123456789abcdef');
    expect(publishPacketBytes('a/b/start/response', '{"status":"ok"}', 1, 3 + correlation.length)).toBe(encoded('a/b/start/response', '{"status":"ok"}', 1, correlation));
  });

  it('is over a limit exactly when the encoded packet is larger', () => {
    for (const n of [10, 200, 900, 990, 1_000, 1_200])
      for (const payload of ['y'.repeat(n), 'ß'.repeat(n)]) {
        const bytes = encoded('chair-agent/s/t', payload, 1);
        expect(overPacketLimit(1_000, 'chair-agent/s/t', payload), `${bytes} bytes`).toBe(bytes > 1_000);
        expect(overPacketLimit(1_000, 'chair-agent/s/t', Buffer.from(payload))).toBe(bytes > 1_000);
      }
  });
});
