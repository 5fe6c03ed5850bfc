import { systemClock, type Clock } from '../platform/clock.js';
import type { Config } from '../config/schema.js';
import type { Logger } from '../platform/logger.js';
import type { Broker } from './broker.js';
import { MqttBroker } from './mqtt-broker.js';
import { OFFLINE, type Topics } from './topics.js';

/** The agent's MQTT client id: mqtt.clientId, or chair-agent-<site.id>. */
export function agentClientId(config: Config): string {
  return config.mqtt.clientId ?? `chair-agent-${config.site.id}`;
}

/** The broker connection the config describes, with the agent's will (bridge/state offline). */
export function brokerFromConfig(config: Config, topics: Topics, logger: Logger, clock: Clock = systemClock): Broker {
  const m = config.mqtt;
  return new MqttBroker({
    url: m.url,
    clientId: agentClientId(config),
    username: m.username,
    password: m.password,
    ca: m.ca,
    cert: m.cert,
    key: m.key,
    proxy: m.proxy,
    rejectUnauthorized: m.rejectUnauthorized,
    protocolVersion: m.protocolVersion,
    keepaliveSeconds: m.keepaliveSeconds,
    reconnectSeconds: m.reconnectSeconds,
    will: { topic: topics.bridgeState, payload: OFFLINE },
    clock,
    logger: logger.child({ component: 'mqtt' }),
  });
}
