// Run by test/integration/store-worker.test.ts under wall-clock-offset.mjs, on the built outbox: a
// burst and its checkpoint, then the wall clock stepped back an hour, then a second burst. Prints
// {"checkpointed":true} when the second burst is checkpointed in time, false when not.
import { writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const [outboxModule, path, offsetFile] = process.argv.slice(2);
const { Outbox } = await import(pathToFileURL(outboxModule).href);
const outbox = new Outbox({ path, worker: { minFrames: 10, periodMs: 200 } });
outbox.open();
const burst = (tag) =>
  outbox.storeDurably(
    Array.from({ length: 200 }, (_, i) => {
      const fields = { TransactionId: `${tag}-${i}`, Status: 'finished', DeviceId: 'MC7001', Amount: 150 };
      return { fields, transactionId: fields.TransactionId, status: 'finished', deviceId: 'MC7001', transactionTime: null };
    }),
    'webhook',
    Date.now(),
  );
/** The next checkpoint, or false when none comes in 5 s (the period is 200 ms). */
const nextCheckpoint = () =>
  new Promise((resolve) => {
    const timeUp = setTimeout(() => resolve(false), 5_000);
    outbox.database.once('checkpointed', () => {
      clearTimeout(timeUp);
      resolve(true);
    });
  });

let next = nextCheckpoint();
await burst('before');
if (!(await next)) throw new Error('no checkpoint before the step');
writeFileSync(offsetFile, String(-3_600_000));
next = nextCheckpoint();
await burst('after');
process.stdout.write(`${JSON.stringify({ checkpointed: await next })}\n`);
// The writer thread never holds a process (the agent's stop has timers that do): this one waits
// for it to close its connections.
const hold = setTimeout(() => undefined, 60_000);
outbox.close();
await outbox.closed();
clearTimeout(hold);
