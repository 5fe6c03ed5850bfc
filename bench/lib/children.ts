import type { ChildProcess } from 'node:child_process';
import { killLeftoverBrokers } from './broker.js';

const live = new Set<ChildProcess>();

/** A process the bench or a test started (an agent, a peer): killed with the leftovers if still running then. */
export function tracked<C extends ChildProcess>(child: C): C {
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

/**
 * Kills whatever the bench started and left running: a benchmark that fails half-way (a peer
 * that does not start, say) throws past the cleanup of what it had started before, and an agent
 * or a Mosquitto left behind would run on, and skew every later measurement on the machine.
 * The bench's entry points call this on exit, however they exit, and the test setup after every
 * test file.
 */
export function killLeftovers(): void {
  for (const child of live) child.kill('SIGKILL');
  live.clear();
  killLeftoverBrokers();
}
