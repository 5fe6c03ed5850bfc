import type { StoreDatabase } from './database.js';

/**
 * The agent's own small state, kept with the records so it moves with them in a recovery: the
 * sync cursor, the chairs announced to Home Assistant, the chairs with retained messages.
 */
export class AgentState {
  constructor(private readonly db: StoreDatabase) {}

  get(key: string): string | undefined {
    return this.db.read('reading state', () => this.db.statement<[string], string>('SELECT value FROM state WHERE key = ?').pluck().get(key));
  }

  /** Writes only when the value differs; resolves once committed. */
  async set(key: string, value: string): Promise<void> {
    if (this.get(key) === value) return;
    const { changed } = await this.db.write(`saving ${key}`, { op: 'state', key, value });
    if (changed) this.db.changed();
  }
}
