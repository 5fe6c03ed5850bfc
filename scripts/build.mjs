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
