import { describe, expect, it } from 'vitest';
import { isJournalStream, withJournalPriority } from '../../agent/platform/journal-priority.js';
import { streamLogSink } from '../../agent/platform/log-sink.js';
import { createLogger } from '../../agent/platform/logger.js';
import { Recorder, StalledPipe } from '../helpers/streams.js';

/** One line at each level, through the logger `run` makes, to a sink over a recorder. */
function logEachLevel(journal: boolean): string[] {
  const out = new Recorder();
  const logger = createLogger({ level: 'trace', destination: streamLogSink(out, { journal }), secrets: ['the-api-key-1234'] }).child({ component: 'test' });
  logger.fatal('fatal');
  logger.error({ apiKey: 'the-api-key-1234' }, 'error the-api-key-1234');
  logger.warn('warn');
  logger.info('info');
  logger.debug('debug');
  logger.trace('trace');
  return out.writes;
}

describe("the priority journald reads from each line (systemd's SyslogLevelPrefix)", () => {
  it('puts the syslog priority of its level before each line written to the journal', () => {
    const lines = logEachLevel(true);
    expect(lines.map((l) => l.slice(0, 3))).toEqual(['<2>', '<3>', '<4>', '<6>', '<7>', '<7>']);
    // After the prefix, which journald strips, the line is the JSON it always was: secrets still scrubbed.
    const error = JSON.parse(lines[1]!.slice(3)) as Record<string, unknown>;
    expect(error).toMatchObject({ level: 'error', component: 'test', msg: 'error [redacted]', apiKey: '[redacted]' });
  });

  it('writes the lines bare where the output is not the journal (a pipe, a file, a terminal)', () => {
    expect(logEachLevel(false).every((l) => l.startsWith('{"level":"'))).toBe(true);
  });

  it('says the dropped lines count as a warning', async () => {
    const out = new StalledPipe({ highWaterMark: 1 });
    const sink = streamLogSink(out, { journal: true, maxQueuedBytes: 10 });
    sink.write('{"level":"info","msg":"queued"}\n');
    sink.write('{"level":"info","msg":"dropped: the reader is behind"}\n');
    out.drain();
    await new Promise((resolve) => setImmediate(resolve));
    out.drain();
    expect(out.written).toHaveLength(2);
    expect(out.written[0]).toBe('<6>{"level":"info","msg":"queued"}\n');
    expect(out.written[1]).toMatch(/^<4>\{"level":"warn".*"dropped":1/);
  });

  it('leaves a line that does not start with a level alone (journald takes it as info)', () => {
    expect(withJournalPriority('plain text\n')).toBe('plain text\n');
    expect(withJournalPriority('{"msg":"no level first"}\n')).toBe('{"msg":"no level first"}\n');
  });

  it('takes stdout for the journal only when JOURNAL_STREAM names its device and inode', () => {
    const stdout = { dev: 8n, ino: 123456789012n };
    expect(isJournalStream('8:123456789012', stdout)).toBe(true);
    // Inherited by a child whose stdout is a pipe or a file: another inode.
    expect(isJournalStream('8:123456789013', stdout)).toBe(false);
    expect(isJournalStream(undefined, stdout)).toBe(false);
    expect(isJournalStream('', stdout)).toBe(false);
    expect(isJournalStream('8:123456789012', null)).toBe(false);
  });
});
