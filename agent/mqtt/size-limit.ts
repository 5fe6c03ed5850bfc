import { BrokerError, type Broker } from './broker.js';
import { overPacketLimit, PACKET_TOO_LARGE } from './packet-size.js';

/**
 * How large a message the site's broker takes, as far as the agent knows: the Maximum Packet Size
 * it announces in its CONNACK (Mosquitto's max_packet_size), and the smallest payload it refused
 * as too large (PUBACK 0x95: Mosquitto's message_size_limit, which it does not announce). One per
 * broker, shared: what B/summary learned holds for the discovery configs too. A publisher with a
 * smaller form of a payload (B/summary without its chairs, a config in Home Assistant's short
 * form) sends that one where the whole one would not fit. What is learned lasts until the agent
 * restarts, so a broker whose limit is raised gets the whole forms again after a restart.
 */
export class BrokerSizeLimit {
  private refusedBytes = Infinity;

  constructor(private readonly broker: Pick<Broker, 'maximumPacketSize' | 'publish'>) {}

  /**
   * Publishes a retained payload whole, or in its short form where the broker is known not to
   * take the whole one, or at once after the broker refuses the whole one as too large (which the
   * refusal guard then counts without a warning). `short` is called only when the short form
   * goes; `failed` hears of any other failure, the short form's too.
   */
  publishRetained(topic: string, whole: string, short: () => string, failed: (err: unknown) => void): void {
    const sendShort = (): void => void this.broker.publish(topic, short(), { qos: 1, retain: true }).catch(failed);
    if (this.tooLarge(topic, whole)) return sendShort();
    this.broker.publish(topic, whole, { qos: 1, retain: true, smallerIfTooLarge: true }).catch((err: unknown) => (this.refused(err, whole) ? sendShort() : failed(err)));
  }

  /** Whether this payload on this topic is one the broker is known not to take. */
  tooLarge(topic: string, payload: string): boolean {
    if (Buffer.byteLength(payload) >= this.refusedBytes) return true;
    const limit = this.broker.maximumPacketSize();
    return limit !== undefined && overPacketLimit(limit, topic, payload);
  }

  /**
   * A publish of this payload failed: true when the broker refused it as too large, which is
   * learned (the failure is the caller's to report).
   */
  refused(err: unknown, payload: string): boolean {
    if (!(err instanceof BrokerError) || err.reasonCode !== PACKET_TOO_LARGE) return false;
    this.refusedBytes = Math.min(this.refusedBytes, Buffer.byteLength(payload));
    return true;
  }

  /** The smallest payload refused as too large, if any was. */
  refusedAt(): number | undefined {
    return this.refusedBytes === Infinity ? undefined : this.refusedBytes;
  }
}
