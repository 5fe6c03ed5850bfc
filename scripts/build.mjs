#!/usr/bin/env node
// `npm run build`: the type-checked compile (tsc), the agent's bundle (scripts/bundle.mjs), and
// the native parts this machine can build (scripts/native-deps.mjs: skipped with one line where
// there is no compiler; the demo, the tests and gpio.driver sim do not need them).
// Run on the project's runtime (sh scripts/node scripts/build.mjs).
import { spawnSync } from 'node:child_process';
import { chmodSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildVersion } from './build-version.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

function step(args) {
  const r = spawnSync(process.execPath, args, { cwd: ROOT, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

/**
 * esbuild (the bundle, and vitest's transforms) runs a binary from its platform package, which
 * declares `engines: node >=18`. npm checks an optional package's engines against the Node.js
 * that runs npm itself, not the pinned runtime, and silently leaves it out on an older one: npm
 * 8.5 on Node.js 12, as Ubuntu 22.04's apt installs them. esbuild's own error then blames
 * --omit=optional. Say what happened and what to install instead.
 */
function esbuildInstalled() {
  const platformPackage = `@esbuild/${process.platform}-${process.arch}`;
  let esbuild;
  try {
    esbuild = require.resolve('esbuild');
  } catch {
    process.stderr.write('build: the build tools are not installed (npm ci leaves them out with --omit=dev, or when NODE_ENV is production): run npm ci without either.\n');
    process.exit(1);
  }
  try {
    createRequire(esbuild).resolve(`${platformPackage}/package.json`);
    return;
  } catch {
    // left out: said below
  }
  // npm run sets this: "npm/8.5.1 node/v12.22.9 linux x64 ...".
  const agent = /npm\/(\S+) node\/v(\d+)(\S*)/.exec(process.env['npm_config_user_agent'] ?? '');
  const say = (line) => process.stderr.write(`build: npm ci left out esbuild's binary (${platformPackage}): ${line}\n`);
  if (agent && Number(agent[2]) >= 18) {
    say('was npm ci run with --omit=optional? Run npm ci again without it.');
  } else {
    say(`npm installs it only when the Node.js that runs npm is 18 or newer${agent ? `, and this was npm ${agent[1]} on Node.js ${agent[2]}${agent[3]}` : ''}.`);
    process.stderr.write("build: install Node.js 22 or newer with its npm (nodejs.org or NodeSource: Ubuntu 22.04's own nodejs is 12), then run npm ci again.\n");
  }
  process.exit(1);
}

esbuildInstalled();

step([require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json']);
step([join(ROOT, 'scripts', 'bundle.mjs')]);
chmodSync(join(ROOT, 'dist', 'agent', 'main.js'), 0o755);
// What `chair-agent --version` and bridge/info print: this build, not only package.json's release.
// Written whole, then renamed: the kernel test and package:check read it while CI builds again
// beside them, and must never see it half written.
const buildInfo = join(ROOT, 'dist', 'agent', 'build-info.json');
writeFileSync(`${buildInfo}.tmp`, `${JSON.stringify({ version: buildVersion(ROOT) })}\n`);
renameSync(`${buildInfo}.tmp`, buildInfo);
step([join(ROOT, 'scripts', 'native-deps.mjs'), '--quiet']);
