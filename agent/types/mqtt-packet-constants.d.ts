// mqtt-packet's protocol constants (a CommonJS module without types of its own); only what
// agent/mqtt/lenient-acks.ts touches.
declare module 'mqtt-packet/constants.js' {
  const constants: { MQTT5_PUBACK_PUBREC_CODES: Record<number, string | undefined> };
  export default constants;
}
