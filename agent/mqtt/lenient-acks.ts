import constants from 'mqtt-packet/constants.js';

/**
 * Mosquitto 2.0 answers a QoS 1 publish over its message_size_limit with PUBACK reason 0x95
 * (Packet too large), a code MQTT 5 allows only in DISCONNECT. mqtt-packet, by the letter of the
 * spec, fails the whole packet as malformed: mqtt.js then reports "Invalid puback reason code",
 * the stream is left mid-packet, and the connection is lost over one refused message, again at
 * every reconnect. A PUBACK or PUBREC with any MQTT 5 error code is taken here for what the
 * broker means by it: that one publish was refused (mqtt.js hands its callback the code).
 */
const ERROR_CODES: Record<number, string> = {
  0x80: 'Unspecified error',
  0x81: 'Malformed Packet',
  0x82: 'Protocol Error',
  0x83: 'Implementation specific error',
  0x87: 'Not authorized',
  0x89: 'Server busy',
  0x8d: 'Keep Alive timeout',
  0x90: 'Topic Name invalid',
  0x91: 'Packet identifier in use',
  0x93: 'Receive Maximum exceeded',
  0x94: 'Topic Alias invalid',
  0x95: 'Packet too large',
  0x96: 'Message rate too high',
  0x97: 'Quota exceeded',
  0x98: 'Administrative action',
  0x99: 'Payload format invalid',
  0x9a: 'Retain not supported',
  0x9b: 'QoS not supported',
};

for (const [code, name] of Object.entries(ERROR_CODES)) constants.MQTT5_PUBACK_PUBREC_CODES[Number(code)] ??= name;

/** Whether the parser takes this PUBACK reason code (for tests). */
export function pubackCodeAccepted(code: number): boolean {
  return constants.MQTT5_PUBACK_PUBREC_CODES[code] !== undefined;
}
