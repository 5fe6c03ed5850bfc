/**
 * journald's priority for a line written to its stream: a "<N>" prefix (sd-daemon(3)), which it
 * strips and keeps as PRIORITY (a unit's SyslogLevelPrefix=, on by default). Without it every line
 * is "info": `journalctl -p err` shows none of the agent's errors, `systemctl status` does not
 * highlight them, and a fleet's log shipper that keeps warnings and worse keeps nothing.
 */

/** syslog's priority of each of pino's level labels. */
const PRIORITY: Record<string, string> = { fatal: '<2>', error: '<3>', warn: '<4>', info: '<6>', debug: '<7>', trace: '<7>' };

/**
 * The line with its priority in front, read from the level the line itself starts with (the
 * logger writes `{"level":"<label>",...`; the label stays in the JSON for whoever reads it).
 * A line that starts otherwise is left as it is: journald takes it as info.
 */
export function withJournalPriority(line: string): string {
  const label = /^\{"level":"([a-z]+)"/.exec(line)?.[1];
  const prefix = label === undefined ? undefined : PRIORITY[label];
  return prefix === undefined ? line : prefix + line;
}

/**
 * What a command writes to standard error (a configuration error that stops `run`, a fatal
 * error), each line as an error: journald files every line as a record of its own.
 */
export function errorLinesForJournal(text: string): string {
  return text.replace(/^(?=.)/gm, '<3>');
}

/**
 * Whether standard output (or error) is journald's stream: systemd sets JOURNAL_STREAM to its "device:inode"
 * when it connects stdout or stderr to the journal, and a program compares it with its own fd
 * (systemd.exec(5)). A child that inherited the variable but writes to a pipe or file gets false.
 */
export function isJournalStream(journalStream: string | undefined, stdout: { dev: number | bigint; ino: number | bigint } | null): boolean {
  if (!journalStream || !stdout) return false;
  const [dev, ino] = journalStream.split(':');
  return dev === String(stdout.dev) && ino === String(stdout.ino);
}
