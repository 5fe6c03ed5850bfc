import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { VERB_HELP } from '../../agent/cli/help.js';
import { track } from '../helpers/agent-process.js';
import { startBroker } from '../helpers/broker.js';
import { MAIN, ROOT } from '../helpers/cli.js';
import { freePort } from '../helpers/ports.js';
import { itWith } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';

const DOCS = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const read = (doc: string): string => readFileSync(join(ROOT, doc), 'utf8');

/** The fenced blocks of a Markdown text, with their language. */
function fences(text: string): { lang: string; body: string }[] {
  return [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1] ?? '', body: m[2] ?? '' }));
}

/** A shell line without its trailing comment. */
const command = (line: string): string => line.replace(/\s+#\s.*$/, '').trim();

describe('the README and docs', () => {
  it('link only to files that exist in the repository', () => {
    const broken: string[] = [];
    for (const doc of DOCS) {
      for (const [, target] of read(doc).matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)) {
        if (/^[a-z]+:/.test(target as string)) continue;
        if (!existsSync(resolve(ROOT, dirname(doc), target as string))) broken.push(`${doc}: ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('use only commands the program has and npm scripts the project has', () => {
    const scripts = Object.keys((JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts);
    const wrong: string[] = [];
    for (const doc of DOCS) {
      for (const block of fences(read(doc)).filter((b) => b.lang === 'sh')) {
        for (const line of block.body.split('\n').map(command)) {
          for (const [, verb] of line.matchAll(/(?:^|[\s;&|(])chair-agent ([a-z][a-z-]*)/g)) if (!(verb! in VERB_HELP) && !['--version', '--help'].includes(verb!)) wrong.push(`${doc}: ${line}`);
          for (const [, script] of line.matchAll(/\bnpm run ([\w:-]+)/g)) if (!scripts.includes(script!)) wrong.push(`${doc}: ${line}`);
        }
      }
    }
    expect(wrong).toEqual([]);
  });

  itWith(['mosquitto', 'mosquitto clients', 'curl'], "the README's walkthrough works as written: simulator, agent, mosquitto_sub, then every command to try", async () => {
    const readme = read('README.md');
    const section = readme.slice(readme.indexOf('## Walkthrough'), readme.indexOf('## Command line'));
    const [, yaml, daemons, tries] = fences(section);
    expect(yaml?.lang).toBe('yaml');
    const broker = await startBroker();
    const [http, sim] = [await freePort(), await freePort()];
    // The README's fixed ports are this run's free ones; `npx chair-agent` is the built program.
    const local = (text: string): string =>
      text
        .replaceAll('npx chair-agent', `"${process.execPath}" "${MAIN}"`)
        .replaceAll('8080', String(http))
        .replaceAll('8090', String(sim))
        .replaceAll('1883', String(broker.port))
        .replace(/mosquitto_(sub|pub) /g, `mosquitto_$1 -p ${broker.port} `);
    const dir = mkdtempSync(join(tmpdir(), 'walkthrough-'));
    writeFileSync(join(dir, 'my-site.yaml'), local(yaml?.body ?? ''));
    const started = (daemons?.body ?? '').split('\n').map(command).filter(Boolean).map((line) => {
      const child = track(spawn('sh', ['-c', `exec ${local(line)}`], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] }));
      const out = { text: '' };
      child.stdout.on('data', (d: Buffer) => (out.text += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out.text += d.toString()));
      return { line, child, out };
    });
    try {
      expect(started.map((s) => s.line.split(' ').slice(0, 3).join(' '))).toEqual(['npx chair-agent simulate', 'npx chair-agent run', "mosquitto_sub -t 'chair-agent/#'"]);
      const [, agent, sub] = started as [unknown, (typeof started)[number], (typeof started)[number]];
      await waitFor(async () => (await fetch(`http://127.0.0.1:${http}/healthz`).catch(() => null))?.status === 200, 'the agent healthy');
      await waitFor(() => sub.out.text.includes('chair-agent/ladprao-01/bridge/state {"state":"online"}'), 'bridge/state online in mosquitto_sub');
      for (const line of (tries?.body ?? '').split('\n').map(command).filter(Boolean)) {
        const r = spawnSync('sh', ['-c', local(line)], { cwd: dir, encoding: 'utf8', timeout: 30_000 });
        expect(r.status, `${line}\n${r.stdout}${r.stderr}`).toBe(0);
        expect(r.stderr, line).not.toContain('Warning');
        // A person reads the answer before typing on: so does this test (the paid use that
        // follows would otherwise take the chair first).
        if (line.includes('/start -m')) {
          await waitFor(() => sub.out.text.includes('chair-agent/ladprao-01/chairs/MC7002/start/response {"status":"ok","transaction":"pos-1"}'), () => `the MQTT start answered, in:\n${sub.out.text}`);
        }
      }
      await waitFor(() => /transactions\/MC7001 .*"Status":"playing"/.test(sub.out.text), "the button's transaction record");
      const exited = new Promise<number | null>((r) => agent.child.once('exit', (code) => r(code)));
      agent.child.kill('SIGINT');
      expect(await exited).toBe(0);
      await waitFor(() => sub.out.text.includes('chair-agent/ladprao-01/bridge/state {"state":"offline"}'), 'bridge/state offline at the stop');
    } finally {
      for (const s of started) s.child.kill('SIGINT');
      await broker.stop();
    }
  });
});
