import { readFileSync } from 'node:fs';
import mqtt from 'mqtt';
import { afterEach, describe, expect, it } from 'vitest';
import { EmbeddedBroker } from '../../agent/demo/embedded-broker.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { nextEvent, waitFor } from '../helpers/wait.js';

const ephemeralLow = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);

// The demo's broker ('b') and vendor simulator ('v', and the tests' uplink cuts) come back on their
// port while clients keep trying it. Below the kernel's ephemeral range, none of those tries can hold it.
describe("the demo's broker", () => {
  let broker: EmbeddedBroker | null = null;
  let client: mqtt.MqttClient | null = null;
  afterEach(async () => {
    await client?.endAsync(true);
    await broker?.close();
  });

  it('listens below the ephemeral range, so its clients retrying while it is down cannot take its port', async () => {
    broker = new EmbeddedBroker();
    await broker.start();
    const port = broker.port;
    expect(port).toBeGreaterThanOrEqual(10_000);
    expect(port).toBeLessThan(ephemeralLow);

    client = mqtt.connect(broker.url, { protocolVersion: 4, reconnectPeriod: 50 });
    await nextEvent(client, 'connect');
    let refused = 0;
    client.on('close', () => (refused += 1));
    await broker.down();
    await waitFor(() => refused >= 3, 'three connects refused while the broker is down');
    const back = nextEvent(client, 'connect');
    await broker.start();
    await back;
    expect(broker.port).toBe(port);
  });
});

describe('the vendor simulator', () => {
  let sim: Simulator | null = null;
  afterEach(async () => {
    await sim?.close();
  });

  it('listens below the ephemeral range, and is reached again on its port after the uplink is cut', async () => {
    sim = new Simulator({ apiKey: 'k' });
    await sim.start();
    const { port, url } = sim;
    expect(port).toBeGreaterThanOrEqual(10_000);
    expect(port).toBeLessThan(ephemeralLow);

    await sim.stop();
    for (let i = 0; i < 3; i++) await expect(fetch(`${url}/sim/state`)).rejects.toThrow();
    await sim.start();
    expect(sim.port).toBe(port);
    expect((await fetch(`${url}/sim/state`)).status).toBe(200);
  });
});
