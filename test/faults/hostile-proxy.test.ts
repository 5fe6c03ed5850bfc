import { createServer, Socket, type Server } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { build } from '../../agent/build.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { startBroker } from '../helpers/broker.js';
import { TEST_API_KEY, testConfig } from '../helpers/config.js';
import { memoryLogger } from '../helpers/memory-logger.js';
import { vendorRecord } from '../helpers/records.js';
import { itWith } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';
import { webhookStatus } from '../helpers/webhook.js';

/**
 * The site's proxy as it may misbehave between the agent and its broker (mqtt.proxy): it answers
 * the CONNECT with something that is not HTTP, closes at once, says 200 and then closes, or says
 * nothing. None of it crashes the agent or costs a record, and each is said in the log; once the
 * proxy tunnels, the record is delivered.
 */

type Mode = 'garbage' | 'close' | 'ok-then-close' | 'silent' | 'tunnel';

/** A proxy on loopback whose behaviour the test switches; 'tunnel' is a real CONNECT tunnel. */
async function fakeProxy(): Promise<{ server: Server; url: string; set: (m: Mode) => void; connects: () => number }> {
  let mode: Mode = 'garbage';
  let connects = 0;
  const held: Socket[] = [];
  const server = createServer((client) => {
    held.push(client);
    client.on('error', () => undefined);
    client.once('data', (head) => {
      connects += 1;
      const target = /^CONNECT ([^ ]+):(\d+) HTTP/.exec(head.toString());
      if (mode === 'garbage') client.end('\x00\xff SSH-2.0-not-a-proxy\r\n\r\n');
      else if (mode === 'close') client.destroy();
      else if (mode === 'ok-then-close') client.end('HTTP/1.1 200 Connection established\r\n\r\n');
      else if (mode === 'tunnel' && target) {
        const upstream = new Socket();
        upstream.on('error', () => client.destroy());
        upstream.connect(Number(target[2]), target[1] === 'localhost' ? '127.0.0.1' : target[1]!, () => {
          client.write('HTTP/1.1 200 Connection established\r\n\r\n');
          client.pipe(upstream).pipe(client);
        });
        client.on('close', () => upstream.destroy());
      }
      // 'silent': holds the connection and says nothing.
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const stop = server.close.bind(server);
  server.close = ((cb?: (err?: Error) => void) => {
    for (const s of held) s.destroy();
    return stop(cb);
  }) as typeof server.close;
  return { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, set: (m) => (mode = m), connects: () => connects };
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The misbehaving proxy in front of a broker reached at `brokerUrl`; the same for every transport. */
async function misbehaves(brokerUrl: string, mqtt5: boolean): Promise<void> {
  const sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 1 });
  await sim.start();
  cleanups.push(() => sim.close());
  const proxy = await fakeProxy();
  cleanups.push(() => new Promise((r) => proxy.server.close(() => r())));
  const { logger, lines } = memoryLogger('info');
  const agent = build(
    testConfig({ vendorUrl: sim.url, brokerUrl }, { site: { id: 'hostile-proxy' }, mqtt: { proxy: proxy.url, protocolVersion: mqtt5 ? 5 : 4 } }),
    { logger },
  );
  await agent.start();
  cleanups.push(() => agent.stop());
  expect(await webhookStatus(`http://127.0.0.1:${agent.http.address().port}`, vendorRecord({ DeviceId: 'MC7001' }))).toBe(200);

  const errors = (): string[] => lines.filter((l) => l.msg === 'broker connection error').map((l) => String(l['err']));
  await waitFor(() => errors().find((e) => /the proxy http:\/\/127\.0\.0\.1:\d+ did not answer the CONNECT as an HTTP proxy does \(HPE_/.test(e)), () => `garbage said: ${JSON.stringify(errors())}`);
  for (const mode of ['close', 'ok-then-close'] as const) {
    proxy.set(mode);
    const before = proxy.connects();
    await waitFor(() => (proxy.connects() > before + 3 ? true : undefined), `attempts through a proxy that does ${mode}`);
  }
  // A TCP tunnel closed before the broker's CONNACK is said once, the proxy named among the causes
  // (over WebSocket the same close is an error of its own, said as such).
  if (brokerUrl.startsWith('ws')) expect(errors()).toContain(`the tunnel through mqtt.proxy closed before the broker answered (socket hang up): the proxy's log says why (a broker it cannot reach, or TLS inspection)`);
  else expect(lines.filter((l) => String(l['fix'] ?? '').includes('or the proxy (mqtt.proxy) closes the tunnel'))).toHaveLength(1);
  proxy.set('silent');
  await waitFor(() => errors().find((e) => /did not answer the CONNECT to localhost:\d+ within 5000 ms/.test(e)), () => `silence said: ${JSON.stringify(errors())}`);
  expect(agent.outbox.stats().pending).toBe(1);
  expect(agent.broker.connected).toBe(false);

  proxy.set('tunnel');
  await waitFor(() => agent.broker.connected || undefined, 'connected once the proxy tunnels');
  await waitFor(() => agent.outbox.stats().pending === 0 || undefined, 'the kept record delivered');
}

it('mqtt://: a proxy that answers garbage, closes, says 200 and closes, or says nothing: the agent runs on, keeps the record, and delivers it once the proxy tunnels', async () => {
  const broker = await startBroker();
  cleanups.push(() => broker.stop());
  await misbehaves(broker.url.replace('127.0.0.1', 'localhost'), broker.mqtt5);
}, 60_000);

itWith('mosquitto with websockets', 'ws://: the same proxy, the same outcome through the WebSocket transport', async () => {
  const broker = await startBroker({ listener: (port) => `listener ${port} 127.0.0.1\nprotocol websockets\nallow_anonymous true` });
  cleanups.push(() => broker.stop());
  await misbehaves(`ws://localhost:${broker.port}/mqtt`, true);
}, 60_000);
