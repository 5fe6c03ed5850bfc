import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MqttBroker } from '../../agent/mqtt/mqtt-broker.js';
import { shorterKeepalive } from '../../agent/mqtt/keepalive-refusal.js';
import { systemClock } from '../../agent/platform/clock.js';
import type { Logger } from '../../agent/platform/logger.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { startBroker } from '../helpers/broker.js';
import { runCli } from '../helpers/cli.js';
import { memoryLogger, type LogRecord } from '../helpers/memory-logger.js';
import { itWith } from '../helpers/tools.js';
import { nextEvent, waitFor } from '../helpers/wait.js';

// A site's Mosquitto with `max_keepalive` under the agent's keepalive (30 s). Since 2.0.12 it
// refuses an MQTT 3.1.1 client so with "Identifier rejected" (MQTT 5 is told the limit instead).

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'keepalive-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function adapter(url: string, logger: Logger): MqttBroker {
  return new MqttBroker({ url, clientId: `keepalive-${process.pid}`, rejectUnauthorized: true, protocolVersion: 4, keepaliveSeconds: 30, reconnectSeconds: 0.2, will: { topic: 'ka/state', payload: 'offline' }, clock: systemClock, logger });
}

describe('a broker whose max_keepalive is under the agent keepalive (MQTT 3.1.1)', () => {
  it('tries each shorter keepalive down to the shortest the config allows', () => {
    const tried: number[] = [];
    for (let k: number | undefined = 30; k !== undefined; k = shorterKeepalive(k)) tried.push(k);
    expect(tried).toEqual([30, 20, 15, 10, 5]);
    expect(shorterKeepalive(3600)).toBe(600);
  });

  itWith('mosquitto 2.0.12 or later', 'connects with the keepalive the broker takes, delivers, and says what to set', async () => {
    const broker = await startBroker({ extra: 'max_keepalive 10\n' });
    const { logger, lines } = memoryLogger('info');
    const mqtt = adapter(broker.url, logger);
    try {
      const up = nextEvent(mqtt, 'connect');
      mqtt.connect();
      await up;
      await mqtt.publish('ka/record', '{"id":1}', { qos: 1, retain: false });
      const refused = lines.filter((l) => l.msg === 'broker connection error');
      expect(refused.map((l) => l['err'])).toEqual(['Connection refused: Identifier rejected']);
      const said = lines.filter((l) => String(l.msg).startsWith('the broker refused a keepalive of 30 s'));
      expect(said).toHaveLength(1);
      expect(said[0]).toMatchObject({ keepaliveSeconds: 10, fix: expect.stringContaining('set mqtt.keepaliveSeconds to 10 or less') });
    } finally {
      await mqtt.end(1_000);
      await broker.stop();
    }
  });

  it('still names the client id when the broker refuses it at every keepalive', async () => {
    // aedes, refusing this client id as a broker with a client id policy does (CONNACK 2).
    const { Aedes } = (await import('aedes')) as unknown as {
      Aedes: { createBroker(o: object): Promise<{ handle: (s: Socket) => void; close(cb: () => void): void }> };
    };
    const aedes = await Aedes.createBroker({
      authenticate: (_c: unknown, _u: unknown, _p: unknown, done: (err: Error | null, ok: boolean | null) => void) => done(Object.assign(new Error('refused'), { returnCode: 2 }), null),
    });
    const server = createServer((s) => aedes.handle(s));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { logger, lines } = memoryLogger('info');
    const mqtt = adapter(`mqtt://127.0.0.1:${(server.address() as AddressInfo).port}`, logger);
    const said = (): LogRecord[] => lines.filter((l) => l.msg === 'the broker refuses this client at every keepalive');
    try {
      mqtt.connect();
      await waitFor(() => said().length > 0, () => `the refusal at every keepalive: ${JSON.stringify(lines)}`);
      // It goes on trying with the configured keepalive, and does not walk the ladder again.
      for (let i = 0; i < 6; i++) await nextEvent(mqtt, 'close');
      expect(said()).toHaveLength(1);
      expect(said()[0]).toMatchObject({ fix: expect.stringContaining('or it refuses the client id') });
      expect(lines.some((l) => String(l.msg).startsWith('the broker refused a keepalive'))).toBe(false);
      expect(mqtt.connected).toBe(false);
    } finally {
      await mqtt.end(1_000);
      server.close();
      await new Promise<void>((r) => aedes.close(r));
    }
  });

  itWith('mosquitto 2.0.12 or later', 'doctor says which keepalive the broker takes', async () => {
    const broker = await startBroker({ extra: 'max_keepalive 15\n' });
    const sim = new Simulator({ apiKey: 'keepalive-key-1234' });
    await sim.start();
    try {
      const path = join(dir, 'doctor.yaml');
      writeFileSync(
        path,
        `site: {id: ka}\nvendor: {baseUrl: "${sim.url}", apiKey: keepalive-key-1234}\nwebhook: {channelSecret: keepalive-secret-1234}\nmqtt: {url: "${broker.url}", protocolVersion: 4}\nstorage: {path: ${join(dir, 'doctor.db')}}\n`,
      );
      const r = await runCli(['doctor', '--config', path]);
      expect(r.code, r.stdout).toBe(1);
      expect(r.stdout).toMatch(/^ok {4}broker .*accepted the connection \(MQTT 3\.1\.1/m);
      expect(r.stdout).toMatch(/^FAIL {2}keepalive .*refused a keepalive of 30 s \("Identifier rejected"\) and accepted 15 s/m);
      expect(r.stdout).toContain('hint: set mqtt.keepaliveSeconds to 15 or less');
    } finally {
      await sim.close();
      await broker.stop();
    }
  });
});
