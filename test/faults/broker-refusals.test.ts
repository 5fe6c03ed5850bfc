import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import mqtt from 'mqtt';
import type { BrokerError } from '../../agent/mqtt/broker.js';
import { MqttBroker } from '../../agent/mqtt/mqtt-broker.js';
import { RefusalGuard } from '../../agent/mqtt/refusal-guard.js';
import { systemClock } from '../../agent/platform/clock.js';
import { build } from '../../agent/build.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { track } from '../helpers/agent-process.js';
import { mosquittoPath, startBroker } from '../helpers/broker.js';
import { freePort, waitForPort } from '../helpers/ports.js';
import { memoryLogger } from '../helpers/memory-logger.js';
import { endpointOptions } from '../../agent/mqtt/client-options.js';
import { pubackCodeAccepted } from '../../agent/mqtt/lenient-acks.js';
import { TEST_API_KEY, testConfig } from '../helpers/config.js';
import { vendorRecord } from '../helpers/records.js';
import { doctorAt, startRig, type Rig } from '../helpers/rig.js';
import { retainedOn, Subscriber } from '../helpers/subscriber.js';
import { describeWith } from '../helpers/tools.js';
import { nextEvent, waitFor } from '../helpers/wait.js';
import { webhookStatus } from '../helpers/webhook.js';

/**
 * A site broker that refuses some of what the agent publishes, as sites misconfigure them:
 * Debian 12's Mosquitto 2.0 with an ACL file or message_size_limit, and max_queued_messages 0
 * (its documented "no maximum"), with which Mosquitto drops the client right after a refusal; or
 * max_packet_size, which Mosquitto announces in its CONNACK and enforces by closing the connection.
 * Whatever is refused, the agent stays connected (or reconnects once), and the rest flows.
 */

/** An ACL file Mosquitto (which reads it as its own user) can read. */
function aclFile(lines: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'acl-'));
  chmodSync(dir, 0o755);
  writeFileSync(join(dir, 'acl'), lines, { mode: 0o644 });
  return join(dir, 'acl');
}


const connects = (rig: Rig): number => rig.lines.filter((l) => l.msg === 'connected to the broker').length;

/** Transactions sent by webhook all reach a subscriber, and nothing is parked for another publish's drop. */
async function transactionsFlow(rig: Rig, site: string, n: number): Promise<void> {
  const sub = await Subscriber.connect(rig.broker.url, `chair-agent/${site}/transactions/+`);
  try {
    const records = Array.from({ length: n }, (_, i) => vendorRecord({ DeviceId: `MC700${(i % 2) + 1}` }));
    for (const r of records) expect(await webhookStatus(rig.base, r)).toBe(200);
    await waitFor(() => sub.messages.length >= n, () => `${n} transactions delivered (got ${sub.messages.length})`, 30_000);
    await waitFor(() => rig.agent.outbox.stats().pending === 0, 'every record marked delivered');
    expect(rig.agent.outbox.stats().parked).toBe(0);
  } finally {
    await sub.close();
  }
}

async function metric(rig: Rig, name: string): Promise<string[]> {
  const text = await (await fetch(`${rig.base}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith(name));
}

describeWith('mosquitto', 'a broker that refuses publishes (Mosquitto: ACL, message_size_limit, max_packet_size, max_queued_messages 0)', () => {
  it("an ACL that denies one chair's state: that topic is held, the connection stays, every transaction is delivered", async () => {
    const site = 'acl-chair';
    const rig = await startRig({
      site,
      chairs: 2,
      broker: { extra: `acl_file ${aclFile(`topic readwrite #\ntopic deny chair-agent/${site}/chairs/MC7002\n`)}\nmax_queued_messages 0\n` },
    });
    try {
      await waitFor(async () => (await metric(rig, 'chair_agent_mqtt_held_topics')).includes('chair_agent_mqtt_held_topics 1'), 'the refused topic held');
      // Transactions flow meanwhile; by the end of the first batch the last drop is behind us.
      await transactionsFlow(rig, site, 6);
      const settled = connects(rig);
      // Mosquitto drops the client on the refusal (often before its PUBACK can be read, so the
      // agent finds the topic by sending suspects alone, two drops each); then it is held and
      // the connection stays. A handful of connections in all, not hundreds a minute.
      expect(settled).toBeLessThanOrEqual(8);
      await transactionsFlow(rig, site, 6);
      expect(connects(rig), rig.lines.map((l) => `${l.msg} ${String(l['topic'] ?? l['err'] ?? '')}`).join('\n')).toBe(settled);
      expect((await fetch(`${rig.base}/healthz`)).status).toBe(200);
      expect(await metric(rig, 'chair_agent_mqtt_held_topics')).toEqual(['chair_agent_mqtt_held_topics 1']);
      const warned = rig.lines.filter((l) => l.msg === 'the broker refused a publish; everything else goes on');
      expect(warned).toHaveLength(1);
      expect(warned[0]).toMatchObject({ topic: `chair-agent/${site}/chairs/MC7002`, class: 'chair' });
      expect(String(warned[0]?.['fix'])).toContain('ACL');
      // What an operator reads: bridge/info (retained) names the held topic and why.
      const info = await Subscriber.connect(rig.broker.url, `chair-agent/${site}/bridge/info`);
      try {
        rig.agent.bridge.publishInfo();
        const m = await info.waitFor((x) => (JSON.parse(x.text) as { refused?: { total: number } }).refused?.total !== undefined && (JSON.parse(x.text) as { refused: { total: number } }).refused.total > 0, 'bridge/info with refusals');
        expect((JSON.parse(m.text) as { refused: { held: { topic: string; class: string }[] } }).refused.held).toEqual([
          expect.objectContaining({ topic: `chair-agent/${site}/chairs/MC7002`, class: 'chair' }),
        ]);
      } finally {
        await info.close();
      }
    } finally {
      await rig.close();
    }
  });

  it('a dozen refused topics that each cost the connection are not taken for another client with this id', async () => {
    // An ACL that allows little (a site that wants only the transactions) costs a connection per
    // refused topic at start, and one per held class at each retry. Past ten closes in a row
    // within a minute the adapter used to take them for a client id clash and wait 5 s, then 10,
    // then 20: nothing was delivered meanwhile, and the warning sent the operator after the id.
    const broker = await startBroker({ extra: `acl_file ${aclFile('topic readwrite ok/#\n')}\nmax_queued_messages 0\n` });
    const { logger, lines } = memoryLogger('info');
    const inner = new MqttBroker({ url: broker.url, clientId: `refusals-${process.pid}`, rejectUnauthorized: true, protocolVersion: 5, keepaliveSeconds: 30, reconnectSeconds: 2, will: { topic: 'ok/state', payload: 'offline' }, clock: systemClock, logger });
    const guard = new RefusalGuard({ inner, classify: () => 'chair', clock: systemClock, logger });
    const connected = async (): Promise<void> => {
      if (!guard.connected) await nextEvent(guard, 'connect');
    };
    try {
      guard.connect();
      await connected();
      await guard.publish('ok/first', '{}', { qos: 1, retain: true });
      const denied = Array.from({ length: 12 }, (_, i) => `denied/${i}`);
      for (const topic of denied) {
        // Refused with its PUBACK, or the connection dropped first and it is sent alone until held.
        while (!guard.refusals().held.some((h) => h.topic === topic)) {
          await connected();
          await guard.publish(topic, '{}', { qos: 1, retain: true }).catch(() => undefined);
        }
      }
      // The last refusal's close may still be on its way: what the broker allows goes at the next connection.
      for (let sent = false; !sent; ) {
        await connected();
        sent = await guard.publish('ok/after', '{}', { qos: 1, retain: true }).then(
          () => true,
          (err: unknown) => (err as BrokerError).kind === 'disconnected' ? false : Promise.reject(err),
        );
      }
      // Mosquitto 2.0 closed the connection at each refusal (a connection per denied topic at
      // least); 2.1 answers and keeps the client.
      const connections = lines.filter((l) => l.msg === 'connected to the broker').length;
      expect(connections === 1 || connections > denied.length, `${connections} connections`).toBe(true);
      expect(lines.map((l) => l.msg)).not.toContain('the broker keeps closing the connection as soon as it accepts it');
    } finally {
      await guard.end(1000);
      await broker.stop();
    }
  });

  it('Home Assistant discovery enabled but homeassistant/# not allowed: starts and bridge requests still work, one warning per topic', async () => {
    const site = 'acl-ha';
    const rig = await startRig({
      site,
      chairs: 2,
      sections: { homeassistant: { enabled: true } },
      broker: { extra: `acl_file ${aclFile(`topic readwrite chair-agent/#\n`)}\nmax_queued_messages 0\n` },
    });
    const sub = await Subscriber.connect(rig.broker.url, `chair-agent/${site}/#`, { protocolVersion: 5 });
    try {
      await waitFor(() => rig.lines.some((l) => l.msg.startsWith('the broker refuses every topic of this class')), 'discovery held as a class');
      await waitFor(() => rig.agent.broker.connected, 'connected again');
      // A bridge request and a start command from another site system, both answered. A request
      // sent while the agent was away is lost (clean session), so the caller asks again, as a
      // POS does after its timeout.
      const pos = await mqtt.connectAsync({ ...endpointOptions({ url: rig.broker.url, protocolVersion: 5, rejectUnauthorized: true }), reconnectPeriod: 0 });
      const ask = async (topic: string, body: string, answered: (m: { topic: string; text: string }) => boolean, what: string): Promise<void> => {
        for (let attempt = 1; ; attempt++) {
          const since = sub.mark();
          await pos.publishAsync(topic, body, { qos: 1 });
          try {
            await sub.waitFor(answered, what, since, 2_000);
            return;
          } catch (err) {
            if (attempt >= 5) throw err;
          }
        }
      };
      try {
        await ask(`chair-agent/${site}/bridge/request/health_check`, '{"transaction":"h-1"}', (m) => m.topic === `chair-agent/${site}/bridge/response/health_check` && m.text.includes('"h-1"'), 'the health_check answer');
        await ask(`chair-agent/${site}/chairs/MC7001/start`, '{"minutes":1,"transaction":"pos-ha"}', (m) => m.topic === `chair-agent/${site}/chairs/MC7001/start/response` && m.text.includes('"pos-ha"'), 'the start answered');
        expect(sub.messages.filter((m) => m.topic === `chair-agent/${site}/chairs/MC7001/start/response`).at(-1)?.text).toContain('"status":"ok"');
      } finally {
        await pos.endAsync();
      }
      // Answers have come back over a connection that holds: from here it stays.
      const settled = connects(rig);
      expect(settled).toBeLessThanOrEqual(8);
      await transactionsFlow(rig, site, 4);
      expect(connects(rig)).toBe(settled);
      const warned = rig.lines.filter((l) => l.msg === 'the broker refused a publish; everything else goes on');
      expect(new Set(warned.map((l) => l['topic'])).size).toBe(warned.length);
      expect(warned.every((l) => String(l['topic']).startsWith('homeassistant/'))).toBe(true);
    } finally {
      await sub.close();
      await rig.close();
    }
  });

  it('max_packet_size below some discovery configs and a record: none is sent, so the connection never drops', async () => {
    const site = 'packet-ha';
    // Mosquitto closes the connection on a packet over max_packet_size, and says the limit in its
    // CONNACK. Before the agent read it, this config cost 8 connections in 15 s while it found
    // the culprits one drop at a time.
    const rig = await startRig({ site, chairs: 2, sections: { homeassistant: { enabled: true } }, broker: { extra: 'max_packet_size 870\n' } });
    const sub = await Subscriber.connect(rig.broker.url, ['homeassistant/#', `chair-agent/${site}/transactions/+`]);
    try {
      // A chair's sensor configs (availability, device, templates) are over the limit as they
      // read: they go in Home Assistant's short form at once, never whole; the Start button's,
      // smaller, goes as it reads.
      const status = `homeassistant/sensor/chair_agent_${site}_MC7001/status/config`;
      const config = await sub.waitFor((m) => m.topic === status, 'the larger config, short');
      expect(config.text.startsWith('{"~":')).toBe(true);
      // Known from the CONNACK, not from a refusal.
      const said = rig.lines.find((l) => l.msg.startsWith('a Home Assistant config is larger than the broker takes'));
      expect(said).toBeDefined();
      expect(said).not.toHaveProperty('refusedAt');
      expect(rig.lines.filter((l) => l.msg === 'the broker refused a publish; everything else goes on' && l['class'] === 'discovery')).toEqual([]);
      const start = await sub.waitFor((m) => m.topic === `homeassistant/button/chair_agent_${site}_MC7002/start/config`, 'a chair config under the limit');
      expect(start.text.startsWith('{"~":')).toBe(false);
      await sub.waitFor((m) => m.topic === `homeassistant/sensor/chair_agent_${site}/backlog/config`, "the site box's configs");
      // Records flow; one over the limit is kept and parked.
      await transactionsFlow(rig, site, 4);
      const big = vendorRecord({ DeviceId: 'MC7001', Label: 'x'.repeat(1_500) });
      expect(await webhookStatus(rig.base, big)).toBe(200);
      await waitFor(() => rig.agent.outbox.stats().parked === 1, 'the record over the limit parked');
      expect(rig.agent.outbox.parking.list()[0]).toMatchObject({ transactionId: big['TransactionId'], reason: expect.stringContaining("larger than the broker's maximum packet size (870 bytes)") });
      expect(sub.messages.some((m) => m.text.includes(String(big['TransactionId'])))).toBe(false);
      expect(connects(rig), rig.lines.map((l) => `${l.msg} ${String(l['topic'] ?? l['err'] ?? '')}`).join('\n')).toBe(1);
    } finally {
      await sub.close();
      await rig.close();
    }
  });

  it('message_size_limit below the discovery configs: PUBACK 0x95 is a refusal of that message, not of the connection', async () => {
    expect(pubackCodeAccepted(0x95)).toBe(true);
    const site = 'size-ha';
    // Mosquitto's default queue settings: it answers 0x95 and keeps the client.
    const rig = await startRig({ site, chairs: 2, sections: { homeassistant: { enabled: true } }, broker: { extra: 'message_size_limit 560\n' } });
    try {
      await waitFor(async () => (await metric(rig, 'chair_agent_mqtt_refused_total{class="discovery"}')).length > 0, 'the oversize configs refused');
      await transactionsFlow(rig, site, 4);
      // One connection from start to end: no refusal cost it.
      expect(connects(rig)).toBe(1);
      expect(rig.lines.some((l) => String(l['err'] ?? '').includes('Invalid puback reason code'))).toBe(false);
      const warned = rig.lines.find((l) => l.msg === 'the broker refused a publish; everything else goes on' && l['class'] === 'discovery');
      expect(warned).toMatchObject({ reasonCode: '0x95' });
      expect(String(warned?.['fix'])).toContain('message_size_limit');
      // doctor reads the agent's report from the broker and says what to change.
      const r = await doctorAt(rig, site);
      // Its own report is over the limit too: doctor says so rather than "all well".
      expect(r.stdout, r.stdout).toMatch(/FAIL\s+refusals\s+the agent is online \(bridge\/state\) but its retained bridge\/info is not on the broker/);
    } finally {
      await rig.close();
    }
  });

  it("message_size_limit below today's summary: it goes out without its chairs, and each chair's day on its own topic", async () => {
    const site = 'size-summary';
    // Twenty chairs each with a use today make a summary of about 2 KB; the broker takes 1 KB.
    const rig = await startRig({ site, chairs: 20, sections: { transactions: { syncSchedule: '* * * * * *' } }, broker: { extra: 'message_size_limit 1024\n' } });
    const sub = await Subscriber.connect(rig.broker.url, [`chair-agent/${site}/summary`, `chair-agent/${site}/chairs/+/today`]);
    try {
      const ids = Array.from({ length: 20 }, (_, i) => `MC${7001 + i}`);
      for (const id of ids) expect(rig.sim.paidUse(id, 5).ok).toBe(true);
      const json = (text: string | undefined): Record<string, unknown> => JSON.parse(text ?? '{}') as Record<string, unknown>;
      const summary = await sub.waitFor((m) => m.topic === `chair-agent/${site}/summary` && (json(m.text)['site'] as { uses?: number } | undefined)?.uses === 20, "the site's 20 uses in B/summary", 0, 20_000);
      expect(json(summary.text)).toMatchObject({ chairs: {}, chairsOmitted: 20, site: { total: expect.any(String) } });
      for (const id of ids) await sub.waitFor((m) => m.topic === `chair-agent/${site}/chairs/${id}/today` && json(m.text)['uses'] === 1, `${id}'s day`);
      // Retained as such: what a late subscriber (Home Assistant after a restart) reads.
      expect(json((await retainedOn(rig.broker.url, `chair-agent/${site}/summary`)) ?? undefined)).toMatchObject({ site: { uses: 20 }, chairsOmitted: 20 });
      // Refused once, not at every use, and the connection stayed.
      expect(rig.lines.filter((l) => String(l.msg).startsWith("today's summary is larger than the broker takes"))).toHaveLength(1);
      expect(connects(rig)).toBe(1);
    } finally {
      await sub.close();
      await rig.close();
    }
  });

  it('message_size_limit and an ACL that holds several topics: bridge/info names one and counts the rest, so doctor can read it', async () => {
    const site = 'size-and-acl-level-4';
    const denied = ['MC7001', 'MC7002', 'MC7003', 'MC7004'];
    const acl = aclFile(`topic readwrite #\n${denied.map((id) => `topic deny chair-agent/${site}/chairs/${id}\n`).join('')}`);
    const rig = await startRig({ site, chairs: 6, broker: { extra: `acl_file ${acl}\nmessage_size_limit 1024\n` } });
    try {
      await waitFor(async () => (await metric(rig, 'chair_agent_mqtt_held_topics')).includes(`chair_agent_mqtt_held_topics ${denied.length}`), 'the denied topics held');
      // Each held topic adds about 200 bytes to bridge/info: whole, it is over the broker's limit.
      const r = await doctorAt(rig, site);
      const info = JSON.parse((await retainedOn(rig.broker.url, `chair-agent/${site}/bridge/info`)) ?? '{}') as { refused?: { held: { topic: string }[]; heldOmitted?: number } };
      expect(info.refused?.held).toHaveLength(1);
      expect(info.refused?.heldOmitted).toBe(denied.length - 1);
      expect(r.stdout, r.stdout).toMatch(new RegExp(`FAIL\\s+refusals\\s+the broker refused \\d+ publish\\(es\\): chair \\d+[^;]*; held back: chair-agent/${site}/chairs/MC700\\d \\(Publish error: Not authorized \\(reason code 0x87\\)\\); and ${denied.length - 1} more`));
      // Refused whole, taken short at once: no warning of its own, and the connection stayed.
      expect(rig.lines.filter((l) => l.msg === 'the broker refused a publish; everything else goes on').map((l) => l['topic'])).toEqual(denied.map((id) => `chair-agent/${site}/chairs/${id}`));
      expect(connects(rig)).toBe(1);
    } finally {
      await rig.close();
    }
  });

  it('message_size_limit below a bridge answer: summary without its chairs, chairs a too_large error, on the response topic too', async () => {
    const site = 'size-answer';
    const ids = Array.from({ length: 12 }, (_, i) => `MC${7001 + i}`);
    const rig = await startRig({ site, chairs: ids.length, sections: { transactions: { syncSchedule: '* * * * * *' } }, broker: { extra: 'message_size_limit 1024\n' } });
    const caller = await mqtt.connectAsync(rig.broker.url, { protocolVersion: 5 });
    try {
      // A use on each of twelve chairs: the summary is about 1.5 KB, the chairs' states about 4 KB.
      for (const id of ids) expect(rig.sim.paidUse(id, 5).ok).toBe(true);
      const summary = await Subscriber.connect(rig.broker.url, `chair-agent/${site}/summary`);
      try {
        await summary.waitFor((m) => (JSON.parse(m.text || '{}') as { site?: { uses?: number } }).site?.uses === ids.length, 'twelve uses today', 0, 20_000);
      } finally {
        await summary.close();
      }
      const answers: { topic: string; text: string; correlation?: string }[] = [];
      caller.on('message', (topic, payload, packet) => answers.push({ topic, text: payload.toString(), correlation: packet.properties?.correlationData?.toString() }));
      await caller.subscribeAsync([`chair-agent/${site}/bridge/response/#`, 'pos/answers'], { qos: 1 });
      const ask = async (name: string, transaction: string): Promise<Record<string, unknown>[]> => {
        await caller.publishAsync(`chair-agent/${site}/bridge/request/${name}`, JSON.stringify({ transaction }), { qos: 1, properties: { responseTopic: 'pos/answers', correlationData: Buffer.from(transaction) } });
        const mine = (): typeof answers => answers.filter((a) => a.text.includes(`"${transaction}"`));
        await waitFor(() => mine().length === 2 || undefined, `the ${name} answer on both topics`);
        expect(mine().find((a) => a.topic === 'pos/answers')?.correlation).toBe(transaction);
        return mine().map((a) => JSON.parse(a.text) as Record<string, unknown>);
      };
      // The summary has a smaller form: the site's figures, its chairs left out and counted.
      for (const a of await ask('summary', 's-1')) expect(a).toMatchObject({ status: 'ok', data: { site: { uses: ids.length }, chairs: {}, chairsOmitted: ids.length } });
      // The chairs have none: an error that says why.
      for (const a of await ask('chairs', 'c-1')) expect(a).toMatchObject({ status: 'error', code: 'too_large', error: expect.stringContaining('message_size_limit') });
      // A small answer goes as always.
      for (const a of await ask('outbox', 'o-1')) expect(a).toMatchObject({ status: 'ok', data: { parked: 0 } });
      expect(rig.lines.filter((l) => l.msg === 'a bridge answer is larger than the broker takes; answered too_large')).toHaveLength(1);
      expect(rig.lines.filter((l) => l.msg === 'the broker refused a publish; everything else goes on')).toEqual([]);
      expect(connects(rig)).toBe(1);
    } finally {
      await caller.endAsync();
      await rig.close();
    }
  });

  it('a broker that keeps no retained messages (retain_available false): connects without retain, state is live, every transaction is delivered', async () => {
    // MQTT 5: the broker refuses the retained will in its CONNACK (0x9A) and would end the
    // connection at a retained publish. Before, the agent was refused at every attempt.
    const site = 'no-retain';
    const rig = await startRig({ site, broker: { extra: 'retain_available false\n' } });
    try {
      await waitFor(() => rig.agent.broker.connected || undefined, 'connected');
      await transactionsFlow(rig, site, 4);
      const info = await Subscriber.connect(rig.broker.url, `chair-agent/${site}/bridge/info`);
      try {
        rig.agent.bridge.publishInfo();
        const m = await info.waitFor(() => true, 'bridge/info, live');
        expect(m.retain).toBe(false);
      } finally {
        await info.close();
      }
      expect(await retainedOn(rig.broker.url, `chair-agent/${site}/bridge/state`)).toBeNull();
      expect(connects(rig)).toBe(1);
      const said = rig.lines.filter((l) => String(l.msg).startsWith('the broker keeps no retained messages'));
      expect(said).toHaveLength(1);
      expect(String(said[0]?.['fix'])).toContain('retain_available');
      expect((await fetch(`${rig.base}/healthz`)).status).toBe(200);
    } finally {
      await rig.close();
    }
  });

  it('MQTT 3.1.1 and a broker that keeps no retained messages: closes said once, then one attempt without retain is taken, and everything flows without it', async () => {
    // MQTT 3.1.1 has no way to say a retained will is not allowed: Mosquitto closes the socket.
    const site = 'no-retain-v4';
    const rig = await startRig({ site, sections: { mqtt: { protocolVersion: 4 } }, broker: { extra: 'retain_available false\n' } });
    try {
      await waitFor(() => rig.lines.some((l) => l.msg === 'the broker ends the connection, or leaves it unanswered, before accepting it'), 'the warning');
      await waitFor(() => rig.agent.broker.connected || undefined, 'connected without retain');
      await transactionsFlow(rig, site, 3);
      expect(await retainedOn(rig.broker.url, `chair-agent/${site}/bridge/state`)).toBeNull();
      const said = rig.lines.filter((l) => l.msg === 'the broker ends the connection, or leaves it unanswered, before accepting it');
      expect(said).toHaveLength(1);
      expect(String(said[0]?.['fix'])).toContain('the agent tries once without retain');
      expect(rig.lines.filter((l) => String(l.msg).startsWith('the broker keeps no retained messages'))).toHaveLength(1);
      // Connected once, and it holds: no retained publish ends it.
      expect(connects(rig)).toBe(1);
    } finally {
      await rig.close();
    }
  });

  it('MQTT 3.1.1 and a broker that closes for another reason (max_qos 0): the attempt without retain is closed too, retain comes back, records wait', async () => {
    const bin = mosquittoPath();
    if (!bin) return;
    const dir = mkdtempSync(join(tmpdir(), 'probe-'));
    chmodSync(dir, 0o755);
    const port = await freePort();
    const conf = join(dir, 'mosquitto.conf');
    const launch = async (extra: string): Promise<ChildProcess> => {
      writeFileSync(conf, `listener ${port} 127.0.0.1\nallow_anonymous true\npersistence false\n${extra}`, { mode: 0o644 });
      const child = spawn(bin, ['-c', conf], { stdio: 'ignore' });
      track(child);
      await waitForPort(port);
      return child;
    };
    let broker = await launch('max_qos 0\n');
    const site = 'probe-v4';
    const sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 1 });
    await sim.start();
    const { logger, lines } = memoryLogger('info');
    const agent = build(testConfig({ vendorUrl: sim.url, brokerUrl: `mqtt://127.0.0.1:${port}` }, { site: { id: site }, mqtt: { protocolVersion: 4 } }), { logger });
    await agent.start();
    try {
      await waitFor(() => lines.some((l) => l.msg === 'the broker ends the connection, or leaves it unanswered, before accepting it'), 'the warning');
      expect(await webhookStatus(`http://127.0.0.1:${agent.http.address().port}`, vendorRecord({ DeviceId: 'MC7001' }))).toBe(200);
      // The attempt without retain, closed as well, and the one after it, with retain again.
      for (let i = 0; i < 3; i++) await nextEvent(agent.broker, 'close');
      expect(lines.filter((l) => String(l.msg).startsWith('the broker keeps no retained messages'))).toEqual([]);
      expect(agent.outbox.stats().pending).toBe(1);
      // The broker as it should be: the agent connects with its retained will and state again.
      broker.kill('SIGKILL');
      broker = await launch('');
      await waitFor(() => agent.broker.connected || undefined, 'connected');
      await waitFor(() => agent.outbox.stats().pending === 0 || undefined, 'the record delivered');
      expect(await retainedOn(`mqtt://127.0.0.1:${port}`, `chair-agent/${site}/bridge/state`)).toContain('online');
    } finally {
      await agent.stop();
      await sim.close();
      broker.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
