import { spawn } from 'node:child_process';
import { closeSync, fsyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { median, round } from './lib/stats.js';

export interface MachineLimits {
  fsyncPerSecond: number;
  sqliteFullCommitsPerSecond: number;
  emptyNodeStartMs: number;
  emptyNodeRssMb: number;
}

/** What this machine can do at best: the ceilings the agent's figures are set against. */
export async function machineLimits(): Promise<MachineLimits> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-limits-'));
  try {
    const fd = openSync(join(dir, 'f'), 'w');
    const block = Buffer.alloc(512, 1);
    let t0 = performance.now();
    for (let i = 0; i < 2000; i++) {
      writeSync(fd, block);
      fsyncSync(fd);
    }
    const fsyncPerSecond = 2000 / ((performance.now() - t0) / 1000);
    closeSync(fd);

    const db = new Database(join(dir, 'x.db'));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    const ins = db.prepare('INSERT INTO t (v) VALUES (?)');
    t0 = performance.now();
    for (let i = 0; i < 2000; i++) ins.run('x'.repeat(300));
    const sqliteFullCommitsPerSecond = 2000 / ((performance.now() - t0) / 1000);
    db.close();

    const starts: number[] = [];
    let rss = 0;
    for (let i = 0; i < 7; i++) {
      const s = performance.now();
      const out = await new Promise<string>((resolve) => {
        const c = spawn(process.execPath, ['-e', 'process.stdout.write(String(process.memoryUsage().rss))']);
        let text = '';
        c.stdout.on('data', (d: Buffer) => (text += d.toString()));
        c.once('exit', () => resolve(text));
      });
      starts.push(performance.now() - s);
      rss = Number(out) / 2 ** 20;
    }
    return {
      fsyncPerSecond: Math.round(fsyncPerSecond),
      sqliteFullCommitsPerSecond: Math.round(sqliteFullCommitsPerSecond),
      emptyNodeStartMs: round(median(starts), 0),
      emptyNodeRssMb: round(rss, 1),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
