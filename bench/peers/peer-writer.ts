// The webhook peer's writer thread (its `thread` mode): the same commit as the peer makes on its
// event loop, made here instead, so the loop never waits on the disk, as the agent's does not.
import { parentPort, workerData } from 'node:worker_threads';
import { openPeerStore, type PeerRecord } from './peer-store.js';

/** main -> writer: commit this record, then answer with the same id. */
export interface PeerWriteRequest extends PeerRecord {
  id: number;
}

/** writer -> main: committed (error: the commit failed, with SQLite's message). */
export interface PeerWriteReply {
  id: number;
  error?: string;
}

const port = parentPort;
if (port) {
  const store = openPeerStore(workerData as string);
  port.on('message', (m: PeerWriteRequest) => {
    try {
      store.commit(m);
      port.postMessage({ id: m.id } satisfies PeerWriteReply);
    } catch (err) {
      port.postMessage({ id: m.id, error: err instanceof Error ? err.message : String(err) } satisfies PeerWriteReply);
    }
  });
}
