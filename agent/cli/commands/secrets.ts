import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { SECRETS } from '../../config/load.js';
import { errorCode, errorMessage } from '../../platform/errors.js';
import { UsageError, type ParsedArgs } from '../args.js';
import { EXIT_FAILURE, EXIT_OK, type CommandContext } from '../context.js';
import { configPath } from '../load-config.js';

const NAMES = SECRETS.map((s) => s.credential);
const MAX_SECRET_BYTES = 64 * 1024;

/** The directory the unit loads credentials from: credentials/ beside the config. */
function storeDir(args: ParsedArgs, ctx: CommandContext): string {
  return join(dirname(configPath(args.config, ctx.env)), 'credentials');
}

function denied(err: unknown): boolean {
  const code = errorCode(err);
  return code === 'EACCES' || code === 'EPERM';
}

/** Reads a secret from standard input: typed without echo on a terminal, or piped. */
export async function readSecret(input: NodeJS.ReadStream, isTTY: boolean, prompt: (text: string) => void, name: string): Promise<string> {
  if (!isTTY) {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of input) {
      size += (chunk as Buffer).length;
      if (size > MAX_SECRET_BYTES) throw new UsageError(`the value is larger than ${MAX_SECRET_BYTES} bytes`);
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
  }
  prompt(`${name} (typing is not shown): `);
  input.setRawMode?.(true);
  input.resume();
  try {
    return await new Promise<string>((resolve, reject) => {
      let value = '';
      const onData = (data: Buffer): void => {
        for (const ch of data.toString('utf8')) {
          if (ch === '\r' || ch === '\n') {
            input.off('data', onData);
            prompt('\n');
            resolve(value);
            return;
          }
          if (ch === '\u0003' || ch === '\u0004') {
            input.off('data', onData);
            prompt('\n');
            reject(new UsageError('cancelled'));
            return;
          }
          if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
          else value += ch;
        }
      };
      input.on('data', onData);
    });
  } finally {
    input.setRawMode?.(false);
    input.pause();
  }
}

/** Writes a 0600 file atomically: a crash leaves the old value or the new one, never half. */
function writeSecretFile(file: string, value: string): void {
  const tmp = join(dirname(file), `.${process.pid}.tmp`);
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, value);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
}

/**
 * `chair-agent secrets set NAME` (the value from standard input, so it is never in the shell's
 * history or in `ps`), `secrets unset NAME`, `secrets list` (which are set, never their values).
 * They are the systemd credentials the unit hands the service, in /etc/chair-agent/credentials.
 */
/** The stored secret's length; 0 when there is no file. Permission problems are thrown. */
function storedLength(file: string): number {
  try {
    return readFileSync(file).length;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
}

export async function secretsCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  const [action, name, ...extra] = args.positionals;
  const dir = storeDir(args, ctx);
  const again = (what: string): string => `sudo chair-agent secrets ${what}${args.config ? ` --config ${args.config}` : ''}`;
  if (action === 'list' && name === undefined) {
    try {
      // Read every file before printing: existsSync() says "absent" for a file it may not see, so a
      // user without the right to look was told every secret was "not set".
      const lines = NAMES.map((n) => `${n.padEnd(16)} ${storedLength(join(dir, n)) > 0 ? 'set' : 'not set'}\n`);
      for (const line of lines) ctx.stdout(line);
      return EXIT_OK;
    } catch (err) {
      if (!denied(err)) throw err;
      ctx.stderr(`chair-agent: cannot read ${dir} (permission denied); run it as root: ${again('list')}\n`);
      return EXIT_FAILURE;
    }
  }
  if ((action !== 'set' && action !== 'unset') || name === undefined || extra.length > 0) {
    throw new UsageError(`secrets takes: set NAME | unset NAME | list (NAME: ${NAMES.join(', ')})`);
  }
  if (!NAMES.includes(name)) throw new UsageError(`unknown secret "${name}"; one of ${NAMES.join(', ')}`);
  const file = join(dir, name);
  try {
    if (action === 'unset') {
      if (existsSync(file)) writeSecretFile(file, '');
      ctx.stdout(`${name} is not set any more; the service notices when it restarts: sudo systemctl restart chair-agent\n`);
      return EXIT_OK;
    }
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const value = await readSecret(ctx.input, ctx.inputIsTTY, ctx.stderr, name);
    if (value === '') {
      ctx.stderr('chair-agent: the value is empty; nothing stored (secrets unset NAME clears one)\n');
      return EXIT_FAILURE;
    }
    writeSecretFile(file, value);
    ctx.stdout(`stored ${name} in ${dir}; the service reads it when it starts: sudo systemctl restart chair-agent\n`);
    return EXIT_OK;
  } catch (err) {
    if (!denied(err)) {
      if (err instanceof UsageError) throw err;
      ctx.stderr(`chair-agent: cannot store ${name} in ${dir}: ${errorMessage(err)}\n`);
      return EXIT_FAILURE;
    }
    ctx.stderr(`chair-agent: cannot write ${dir} (permission denied); run it as root: ${again(`${action} ${name}`)}\n`);
    return EXIT_FAILURE;
  }
}
