/**
 * A broker's keepalive limit as an MQTT 3.1.1 client meets it.
 *
 * MQTT 5 lets a broker answer a keepalive over its limit with its own (Server Keep Alive), which
 * mqtt.js then keeps. MQTT 3.1.1 has no way to say it: Mosquitto 2.0.12 and later (Debian 13's
 * 2.0.21, 2.1) refuse such a client with CONNACK 2, "Identifier rejected", so a site whose broker
 * sets `max_keepalive` below `mqtt.keepaliveSeconds` would see the agent refused for ever, with a
 * reason that points at the client id. Mosquitto 2.0.11 (Debian 12's) lets it in.
 *
 * Nothing says which of the two a CONNACK 2 means, so the keepalive is tried shorter, down this
 * ladder, and what the broker accepts is kept. A broker that refuses even the shortest refuses
 * the client id.
 */

/** Keepalives tried after a refusal, longest first. 5 s is the shortest the config allows. */
const LADDER = [600, 300, 120, 60, 30, 20, 15, 10, 5];

/** CONNACK's return code 2 in MQTT 3.1.1. */
const IDENTIFIER_REJECTED = 2;

/** True when this error is a CONNACK that a shorter keepalive may get past. */
export function isKeepaliveSuspect(err: unknown, protocolVersion: 4 | 5): boolean {
  return protocolVersion === 4 && (err as { code?: unknown } | null)?.code === IDENTIFIER_REJECTED;
}

/** The next keepalive to try after `refused` seconds was refused, or undefined at the shortest. */
export function shorterKeepalive(refused: number): number | undefined {
  return LADDER.find((s) => s < refused);
}

/** What to change, once the broker has accepted `accepted` seconds where `configured` was refused. */
export function keepaliveFix(configured: number, accepted: number): string {
  return `set mqtt.keepaliveSeconds to ${accepted} or less (the broker's max_keepalive is under ${configured}), or mqtt.protocolVersion: 5, in which the broker says its limit itself`;
}

/** Said when even the shortest keepalive is refused: then it is the client id, as a rule. */
export const IDENTIFIER_FIX =
  "refused at every keepalive down to 5 s: the broker's max_keepalive is under 5 s (Mosquitto 2.1 allows that), or it refuses the client id (mqtt.clientId, by default chair-agent-<site.id>): a client id policy, or a length limit (some brokers take at most 23 characters in MQTT 3.1.1)";
