import type { Clock, Timer } from '../platform/clock.js';
import type { Component } from '../platform/component.js';
import type { Logger } from '../platform/logger.js';
import { errorMessage } from '../platform/errors.js';
import type { Health } from '../observe/health.js';
import type { GroupCommit } from './group-commit.js';
import type { Outbox } from './outbox.js';
import { failingStorage } from './failing-storage.js';
import { volatileStorage, type VolatileStorage } from './volatile-storage.js';

/** How often the file and its file system are looked at while the box is idle (a stat, the mount table, a read-only open: no disk write). */
const FILE_CHECK_MS = 30_000;

export interface StoreComponentDeps {
  outbox: Outbox;
  /** The webhook's group commit: what it holds is committed before the database closes. */
  commits: GroupCommit;
  health: Health;
  clock: Clock;
  logger: Logger;
}

/**
 * The database as a running part of the agent: opened at start and closed last of what uses it;
 * its state in health ("database"), including a file on storage the next power cut empties
 * (tmpfs, Raspberry Pi OS's overlay), which is not healthy however well it takes writes; and the
 * file looked at every 30 s as well as before each write, so a database deleted while the box is
 * idle is recreated, its waiting records kept, and reported; and its file system, so one the
 * kernel made read-only (a failing SD card) is reported on an idle box too.
 */
export class StoreComponent implements Component {
  readonly name = 'store';
  private fileCheck: Timer | null = null;
  private volatile: VolatileStorage | null = null;
  /** Why the database could not be opened, while it cannot. */
  private openFailure: string | null = null;

  constructor(private readonly deps: StoreComponentDeps) {}

  private readonly onWritable = (ok: boolean, detail: string): void => {
    this.deps.health.set('database', ok && this.volatile === null, ok ? this.detail(detail) : detail);
    if (ok) {
      this.deps.logger.info('database writable again');
      return;
    }
    const storage = failingStorage(this.deps.outbox.path);
    this.deps.logger.error({ err: detail, ...(storage ? { fix: storage.advice } : {}) }, 'database not writable; the agent keeps running and keeps what it has stored');
  };

  private readonly onRecovered = (moved: number): void =>
    this.deps.logger.error(
      { path: this.deps.outbox.path, moved },
      'the database file was deleted or replaced while running: recreated it and moved every waiting record into it',
    );

  private readonly onCheckpoint = (problem: string | null): void => {
    if (problem === null) this.deps.logger.info('background checkpoints work again');
    else this.deps.logger.warn({ err: problem }, 'background checkpoint failed; retried after the next write');
  };

  private detail(detail: string): string {
    return this.volatile ? `${detail}, but volatile: ${this.volatile.advice}` : detail;
  }

  start(): void {
    const { outbox, clock, logger } = this.deps;
    this.volatile = volatileStorage(outbox.path);
    const db = outbox.database;
    db.on('writable', this.onWritable);
    db.on('recovered', this.onRecovered);
    db.on('checkpoint', this.onCheckpoint);
    this.fileCheck = clock.setInterval(() => this.check(), FILE_CHECK_MS);
    if (!this.openOrReport()) return;
    if (this.volatile) logger.error({ fileSystem: this.volatile.fileSystem }, this.volatile.advice);
  }

  private check(): void {
    const db = this.deps.outbox.database;
    if (!db.isOpen) {
      this.openOrReport();
      return;
    }
    try {
      db.ensureFile('checking the database file');
      db.checkFileSystem('checking the database file');
    } catch {
      // reported through the writable event
    }
  }

  /**
   * Opens the database, or says why it cannot be and leaves the agent running without it: storage
   * that fails (a card the kernel shut down after a disk error, a USB disk pulled) must not take
   * the buttons, LEDs and chair states with it. Webhooks are answered 503 meanwhile, so nothing
   * is acknowledged that is not stored; the file check tries again every 30 s.
   */
  private openOrReport(): boolean {
    const { outbox, health, logger } = this.deps;
    const db = outbox.database;
    const wasFailing = this.openFailure !== null;
    try {
      outbox.open();
    } catch (err) {
      const detail = errorMessage(err);
      if (detail !== this.openFailure) {
        health.set('database', false, detail);
        const storage = failingStorage(outbox.path);
        logger.error({ err: detail, ...(storage ? { fix: storage.advice } : {}) }, 'cannot open the database; the agent runs without it (webhooks 503) and tries again every 30 s');
      }
      this.openFailure = detail;
      return false;
    }
    this.openFailure = null;
    health.set('database', this.volatile === null, this.detail('writable'));
    if (wasFailing) logger.info({ path: outbox.path }, 'database opened');
    // A box restarted on a card that is still read-only opens it (SQLite falls back to reading).
    db.checkFileSystem('opening the database');
    return true;
  }

  async stop(): Promise<void> {
    this.fileCheck?.cancel();
    this.fileCheck = null;
    await this.deps.commits.drain();
    this.deps.outbox.close();
    const db = this.deps.outbox.database;
    db.off('writable', this.onWritable);
    db.off('recovered', this.onRecovered);
    db.off('checkpoint', this.onCheckpoint);
    // The writer thread closes its connections on its own; main.ts exits once stop() returns.
    await this.deps.outbox.closed();
  }
}
