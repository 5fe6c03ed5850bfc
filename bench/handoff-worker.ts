// The worker side of bench/handoff.ts: waits as long as it is asked (standing in for the
// writer thread's fsync: the thread sleeps in the kernel, as it would in fsync), then answers.
import { parentPort } from 'node:worker_threads';

/** main -> worker: wait `workMs`, then answer with the same id. */
export interface HandoffRequest {
  id: number;
  workMs: number;
}

/** worker -> main. */
export interface HandoffReply {
  id: number;
}

const port = parentPort;
if (port) {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  port.on('message', (m: HandoffRequest) => {
    if (m.workMs > 0) Atomics.wait(cell, 0, 0, m.workMs);
    port.postMessage({ id: m.id } satisfies HandoffReply);
  });
}
