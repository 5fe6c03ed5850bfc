/** MQTT 5's reason code "Packet too large". */
export const PACKET_TOO_LARGE = 0x95;

/** Bytes of an MQTT Variable Byte Integer holding n. */
function varintBytes(n: number): number {
  return n < 128 ? 1 : n < 16_384 ? 2 : n < 2_097_152 ? 3 : 4;
}

/**
 * Bytes of an MQTT 5 PUBLISH packet: fixed header, topic, packet id (QoS 1), properties and
 * payload. What a broker's Maximum Packet Size (CONNACK) is compared with: Mosquitto's
 * max_packet_size, and a broker that announces one closes the connection on a larger packet.
 */
export function publishPacketBytes(topic: string, payload: string | Buffer, qos: 0 | 1 = 1, propertyBytes = 0): number {
  const payloadBytes = typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length;
  const remaining = 2 + Buffer.byteLength(topic) + (qos > 0 ? 2 : 0) + varintBytes(propertyBytes) + propertyBytes + payloadBytes;
  return 1 + varintBytes(remaining) + remaining;
}

/**
 * Whether such a packet is larger than limit. A UTF-16 code unit is at most 3 bytes of UTF-8, so
 * most packets are cleared without counting their bytes.
 */
export function overPacketLimit(limit: number, topic: string, payload: string | Buffer, qos: 0 | 1 = 1, propertyBytes = 0): boolean {
  const units = typeof payload === 'string' ? 3 * payload.length : payload.length;
  if (3 * topic.length + units + propertyBytes + 16 <= limit) return false;
  return publishPacketBytes(topic, payload, qos, propertyBytes) > limit;
}
