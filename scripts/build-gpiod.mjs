#!/usr/bin/env node
// Builds the gpiod addon (native/gpiod/chair_gpiod.c), a Node-API module: one binary per CPU
// serves Node 22, 24 and 26.
//
//   node scripts/build-gpiod.mjs --host                 for this machine, into native/prebuilds/linux-<arch>/
//   node scripts/build-gpiod.mjs --arch arm64 --include DIR --out FILE    (npm run package: cross-built)
//
// The headers (node_api.h, uv.h) come from a Node runtime's include/node: by default the one
// running this script (the project's pinned runtime).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SOURCE = join(ROOT, 'native', 'gpiod', 'chair_gpiod.c');
const COMPILERS = { x64: ['cc', 'gcc', 'x86_64-linux-gnu-gcc'], arm64: ['aarch64-linux-gnu-gcc'] };

const { values } = parseArgs({
  options: { host: { type: 'boolean' }, arch: { type: 'string' }, include: { type: 'string' }, out: { type: 'string' }, quiet: { type: 'boolean' } },
});
const say = (text) => process.stderr.write(`build-gpiod: ${text}\n`);

const arch = values.host ? process.arch : values.arch;
if (!arch || !COMPILERS[arch]) {
  say(`no compiler known for ${arch ?? '(no --arch)'}; built for: ${Object.keys(COMPILERS).join(', ')}`);
  process.exit(1);
}
if (process.platform !== 'linux') {
  say('the GPIO character device is Linux only');
  process.exit(1);
}
const hostCompilers = arch === process.arch ? [...COMPILERS[arch], ...(arch === 'arm64' ? ['cc', 'gcc'] : [])] : COMPILERS[arch];
const cc = hostCompilers.find((c) => spawnSync('sh', ['-c', `command -v ${c}`], { stdio: 'ignore' }).status === 0);
if (!cc) {
  say(`no C compiler for ${arch} (tried ${hostCompilers.join(', ')})${arch === 'arm64' ? ': apt install gcc-aarch64-linux-gnu' : ''}`);
  process.exit(1);
}
const include = values.include ?? join(dirname(dirname(process.execPath)), 'include', 'node');
if (!existsSync(join(include, 'node_api.h')) || !existsSync(join(include, 'uv.h'))) {
  say(`no Node headers (node_api.h, uv.h) in ${include}`);
  process.exit(1);
}
const out = values.out ?? join(ROOT, 'native', 'prebuilds', `linux-${arch}`, 'chair_gpiod.node');
mkdirSync(dirname(out), { recursive: true });
const args = ['-std=gnu11', '-O2', '-Wall', '-Wextra', '-Werror', '-fPIC', '-shared', '-fvisibility=hidden', '-DNAPI_DISABLE_CPP_EXCEPTIONS', `-I${include}`, '-o', out, SOURCE];
const r = spawnSync(cc, args, { encoding: 'utf8' });
if (r.status !== 0) {
  say(`${cc} failed:\n${r.stderr}`);
  process.exit(1);
}
if (!values.quiet) say(`built ${out.startsWith(ROOT) ? out.slice(ROOT.length + 1) : out} (${arch}, ${cc})`);
