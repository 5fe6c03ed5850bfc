import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Simulator } from '../../agent/simulator/simulator.js';
import { startBroker } from '../helpers/broker.js';
import { runCli } from '../helpers/cli.js';
import { TEST_API_KEY, TEST_SECRET } from '../helpers/config.js';
import { describeWith } from '../helpers/tools.js';

let dir: string;
let sim: Simulator;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mqtt-socks-'));
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 2 });
  await sim.start();
});
afterAll(async () => {
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
});

describeWith(['mosquitto'], "mqtt.js's MQTTJS_SOCKS_PROXY in the environment", () => {
  it('changes nothing: the built agent reaches the broker as its config says (mqtt.proxy is the one way to a proxy)', async () => {
    const broker = await startBroker();
    const path = join(dir, 'env-socks.yaml');
    writeFileSync(path, `site: {id: env-socks}\nvendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}}\nwebhook: {channelSecret: ${TEST_SECRET}}\nmqtt: {url: "${broker.url}"}\nstorage: {path: ${join(dir, 'env-socks.db')}}\n`);
    try {
      // A proxy that is not there: followed, every connection would fail.
      const doctor = await runCli(['doctor', '--config', path], { MQTTJS_SOCKS_PROXY: 'socks5://127.0.0.1:9' });
      expect(doctor.stdout).toMatch(new RegExp(`^ok {4}broker {6}${broker.url} accepted the connection`, 'm'));
    } finally {
      await broker.stop();
    }
  });
});
