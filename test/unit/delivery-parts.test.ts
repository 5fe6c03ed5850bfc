import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { AckBatcher } from '../../agent/delivery/ack-batcher.js';
import { InFlightWindow } from '../../agent/delivery/in-flight-window.js';
import { ReadAhead } from '../../agent/delivery/read-ahead.js';
import { BrokerError, type Broker } from '../../agent/mqtt/broker.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { Outbox, type StoredRecord } from '../../agent/store/outbox.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { memoryLogger } from '../helpers/memory-logger.js';
import { asRecord, storeAll, vendorRecord } from '../helpers/records.js';

async function outboxWith(n: number): Promise<Outbox> {
  const outbox = new Outbox({ path: ':memory:' });
  outbox.open();
  if (n > 0) await storeAll(outbox, Array.from({ length: n }, () => asRecord(vendorRecord())), 'poll', 1000);
  return outbox;
}

/** Counts the outbox's reads of waiting records. */
function countReads(outbox: Outbox): { reads: number } {
  const counter = { reads: 0 };
  const pending = outbox.pending.bind(outbox);
  outbox.pending = (after, limit) => {
    counter.reads += 1;
    return pending(after, limit);
  };
  return counter;
}

describe('ReadAhead: the cursor over waiting records', () => {
  it('reads the outbox a batch at a time, oldest first, and not again while nothing was written', async () => {
    const outbox = await outboxWith(12);
    const counter = countReads(outbox);
    const reader = new ReadAhead(outbox, () => false, 5);
    const seqs: number[] = [];
    for (let rec = reader.next(); rec; rec = reader.next()) seqs.push(rec.seq);
    expect(seqs).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    expect(counter.reads).toBe(3); // 5 + 5 + 2: the short batch says it reached the end
    expect(reader.next()).toBeUndefined();
    expect(counter.reads).toBe(3);
  });

  it('takes records as they are stored when caught up, without reading them back', async () => {
    const outbox = await outboxWith(0);
    const reader = new ReadAhead(outbox, () => false, 5);
    outbox.on('stored', reader.take);
    expect(reader.next()).toBeUndefined();
    const counter = countReads(outbox);
    await storeAll(outbox, [asRecord(vendorRecord()), asRecord(vendorRecord())], 'webhook', 2000);
    expect([reader.next()?.seq, reader.next()?.seq, reader.next()]).toEqual([1, 2, undefined]);
    expect(counter.reads).toBe(0);
  });

  /** A cursor caught up with an empty outbox, then one commit of 8 records: what it hands out, and how often it read. */
  async function afterOneCommitOf8(batch: number, hold?: number): Promise<{ seqs: number[]; reads: number }> {
    const outbox = await outboxWith(0);
    const reader = new ReadAhead(outbox, () => false, batch, hold);
    outbox.on('stored', reader.take);
    expect(reader.next()).toBeUndefined();
    const counter = countReads(outbox);
    await storeAll(outbox, Array.from({ length: 8 }, () => asRecord(vendorRecord())), 'poll', 2000);
    const seqs: number[] = [];
    for (let rec = reader.next(); rec; rec = reader.next()) seqs.push(rec.seq);
    return { seqs, reads: counter.reads };
  }

  it('takes a commit larger than its read batch without reading it back', async () => {
    expect(await afterOneCommitOf8(5)).toEqual({ seqs: [1, 2, 3, 4, 5, 6, 7, 8], reads: 0 });
  });

  it('reads back a commit larger than what it may hold, so memory stays bounded', async () => {
    expect(await afterOneCommitOf8(5, 6)).toEqual({ seqs: [1, 2, 3, 4, 5, 6, 7, 8], reads: 2 }); // 5 + 3
  });

  it('reads again from the oldest after a rescan, so records stored out of order are not missed', async () => {
    const outbox = await outboxWith(3);
    const reader = new ReadAhead(outbox, () => false, 5);
    while (reader.next());
    reader.rescan();
    expect(reader.next()?.seq).toBe(1);
  });
});

/** A broker whose PUBACKs the test gives by hand. */
class HandBroker extends EventEmitter {
  connected = true;
  suspectMode = false;
  readonly sent: { seq: number; done: (err: BrokerError | null) => void }[] = [];
  send(_topic: string, payload: string, _o: unknown, done: (err: BrokerError | null) => void): void {
    this.sent.push({ seq: (JSON.parse(payload) as { seq: number }).seq, done });
  }
  receiveMaximum(): number {
    return 10;
  }
  settling(): boolean {
    return false;
  }
}

const rec = (seq: number): StoredRecord => ({ seq, transactionId: `T${seq}`, status: 'playing', deviceId: 'MC7001', record: '{}', source: 'poll', receivedAt: 0, crc: null });

describe('InFlightWindow: records handed to the broker', () => {
  function windowOf(maxInflight: number, ackTimeoutMs = 1000) {
    const clock = new FakeClock();
    const broker = new HandBroker();
    const events: string[] = [];
    const window = new InFlightWindow({
      broker: broker as unknown as Broker,
      clock,
      maxInflight,
      ackTimeoutMs,
      onAck: (seq) => events.push(`ack ${seq}`),
      onFail: (r, err) => events.push(`fail ${r.seq} ${(err as BrokerError).kind}`),
      onDropped: (r) => events.push(`dropped ${r.seq}`),
      onFreed: () => undefined,
    });
    window.start();
    const send = (seq: number): void => window.send(rec(seq), 't', JSON.stringify({ seq }));
    return { clock, broker, window, events, send };
  }

  it('is as wide as mqtt.maxInflight within the broker\'s Receive Maximum, and one at a time while a record is suspected', () => {
    const w = windowOf(4);
    expect(w.window.capacity()).toBe(4);
    w.send(1);
    w.send(2);
    w.window.connectionLost(null);
    expect(w.window.capacity()).toBe(1);
    expect(w.window.strikes(1)).toBe(0); // two were in flight: neither is blamed
  });

  it('gives a strike to a record alone in flight when the connection drops, none when the close has another cause', () => {
    const w = windowOf(4);
    w.send(7);
    w.window.connectionLost(null);
    w.window.connectionLost('a refused retained publish');
    expect(w.window.strikes(7)).toBe(1);
    w.broker.sent[0]?.done(new BrokerError('disconnected', 'gone'));
    return Promise.resolve().then(() => expect(w.events).toEqual(['fail 7 disconnected']));
  });

  it('finds a record the broker passed over while acknowledging later ones, and ignores its PUBACK if it comes after all', async () => {
    const w = windowOf(4, 1000);
    w.send(1);
    await w.clock.advance(10);
    w.send(2);
    w.broker.sent[1]?.done(null);
    await w.clock.advance(1500);
    expect(w.events).toEqual(['ack 2', 'dropped 1']);
    expect(w.window.size).toBe(0);
    w.broker.sent[0]?.done(null);
    expect(w.events).toEqual(['ack 2', 'dropped 1']);
  });
});

describe('AckBatcher: delivered marks', () => {
  it('marks what was acknowledged within the interval in one write, and keeps it handled until then', async () => {
    const clock = new FakeClock();
    const outbox = await outboxWith(5);
    let writes = 0;
    outbox.on('delivered', () => (writes += 1));
    const marked: number[] = [];
    const acks = new AckBatcher({ outbox, clock, logger: silentLogger(), intervalMs: 200, onMarked: (n) => marked.push(n) });
    for (const seq of [1, 2, 3]) acks.add(seq);
    expect(acks.has(2)).toBe(true);
    expect(outbox.stats().delivered).toBe(0);
    await clock.advance(200);
    expect({ writes, marked, delivered: outbox.stats().delivered, has: acks.has(2) }).toEqual({ writes: 1, marked: [3], delivered: 3, has: false });
  });

  it('keeps the records acknowledged when a mark fails and marks them on the next try', async () => {
    const clock = new FakeClock();
    const outbox = await outboxWith(2);
    const realMark = outbox.markDelivered.bind(outbox);
    let fail = true;
    outbox.markDelivered = (seqs, at) => (fail ? Promise.reject(new Error('disk I/O error')) : realMark(seqs, at));
    const { logger, lines } = memoryLogger();
    const acks = new AckBatcher({ outbox, clock, logger, intervalMs: 200, onMarked: () => undefined });
    acks.add(1);
    acks.add(2);
    await clock.advance(200);
    expect(acks.has(1)).toBe(true);
    expect(outbox.stats().delivered).toBe(0);
    // Failing for an hour (a read-only SD card) is one line, not one per retry; working again, another.
    await clock.advance(3_600_000);
    expect(outbox.stats().delivered).toBe(0);
    fail = false;
    await clock.advance(5_000);
    expect(outbox.stats().delivered).toBe(2);
    expect(lines.map((l) => [l.level, l.msg.split(';')[0], l['err']])).toEqual([
      ['error', 'cannot mark delivered records', 'disk I/O error'],
      ['info', 'delivered records marked again', undefined],
    ]);
  });

  it('marks every acknowledgement at once while closing', async () => {
    const outbox = await outboxWith(3);
    const acks = new AckBatcher({ outbox, clock: new FakeClock(), logger: silentLogger(), intervalMs: 60_000, onMarked: () => undefined });
    acks.add(1);
    acks.markAtOnce();
    acks.add(2);
    await acks.close();
    expect(outbox.stats().delivered).toBe(2);
  });
});
