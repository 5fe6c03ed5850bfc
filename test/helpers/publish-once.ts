import mqtt from 'mqtt';

/** What the broker did with one publish: acknowledged it, or ended the sender's connection. */
export type PublishOutcome = { accepted: true } | { accepted: false; reasonCode: number | undefined };

/**
 * Publishes one QoS 1 message from a client of its own, for a packet a broker may refuse by
 * dropping its sender. Mosquitto 2.0.21 (Debian 13, Raspberry Pi OS Trixie) disconnects a client
 * that puts a wildcard in a Response Topic (Protocol Error, as MQTT 5 requires); 2.0.11 forwards
 * it. On a shared client the refusal would take every later test down with it: a reconnecting
 * client resends the refused packet and is dropped again, for ever.
 */
export async function publishOnce(url: string, topic: string, payload: string, options: mqtt.IClientPublishOptions = {}): Promise<PublishOutcome> {
  const client = await mqtt.connectAsync(url, { protocolVersion: 5, reconnectPeriod: 0 });
  let reasonCode: number | undefined;
  client.on('disconnect', (packet) => void (reasonCode = packet.reasonCode));
  client.on('error', () => undefined);
  try {
    return await new Promise<PublishOutcome>((resolve) => {
      client.once('close', () => resolve({ accepted: false, reasonCode }));
      client.publish(topic, payload, { qos: 1, ...options }, (err) => resolve(err ? { accepted: false, reasonCode } : { accepted: true }));
    });
  } finally {
    client.end(true);
  }
}
