#!/usr/bin/env node
// `npm run package:check`: the packages of dist/pkg/ as a site installer meets them, on this
// x86-64 machine (CI runs it after `npm run package`).
//
//  arm64  The tarball's own runtime (runtime/bin/node, aarch64) under qemu user-mode emulation:
//         `check` on a config, then `run` against the vendor simulator with simulated GPIO,
//         publishing chair states to a real Mosquitto; a signed webhook stored in SQLite and
//         delivered over MQTT; a button press that starts a chair; SIGTERM.
//  deb    The amd64 .deb in Debian 12 and 13 chroots (mmdebstrap, cached): apt install, secrets set,
//         check as root and as a user who may not, doctor, the agent run as the service user,
//         an upgrade that keeps config, credentials and the database, remove, purge; the arm64
//         .deb refused on amd64.
//  repo   The fleet's signed apt repository, added to fresh Debian 12 and 13 roots: install, then
//         upgrades from stable only.
//
// `npm run package:check -- arm64` or `-- deb` runs one part. Needs qemu-user-static,
// libc6-arm64-cross, mosquitto, and for the deb part root and mmdebstrap.
import { spawn, spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { chmodSync, cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import mqtt from 'mqtt';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const PKG = join(ROOT, 'dist', 'pkg');
// The Debian roots, kept between runs: a clean clone's dist/ has none, so CI keeps them with its
// other roots (PKG_CHECK_CACHE), where they are made once a day.
const CACHE = process.env.PKG_CHECK_CACHE || join(PKG, 'cache');
const VERSION = JSON.parse(readFileSync(join(ROOT, 'dist', 'agent', 'build-info.json'), 'utf8')).version;
const MAIN = join(ROOT, 'dist', 'agent', 'main.js');
// The arm64 package runs on a Pi 4's core, Cortex-A72: ARMv8.0-A, the ISA of the Pi 3, 4 and Zero 2
// W as well. qemu's default CPU (`max`) has every extension up to ARMv9, so a prebuilt binary made
// for a newer core (LSE atomics, dot product) would pass here and die of SIGILL on most site
// boxes. (The kernel test's VM is a Pi 5's Cortex-A76.)
const QEMU = ['qemu-aarch64-static', '-cpu', 'cortex-a72', '-L', '/usr/aarch64-linux-gnu'];
// Prints the arch, the version and whether the CPU it runs on has LSE atomics (ARMv8.1), read from
// AT_HWCAP in the auxiliary vector, which qemu gives its guest as the kernel would.
const CPU_PROBE = `const b = require('node:fs').readFileSync('/proc/self/auxv'); let hwcap = 0n;
for (let i = 0; i + 16 <= b.length; i += 16) if (b.readBigUInt64LE(i) === 16n) hwcap = b.readBigUInt64LE(i + 8);
console.log(process.arch, process.version, hwcap & 256n ? 'lse' : 'no-lse')`;
// The Debian releases a site box runs: 12, and 13 (Raspberry Pi OS Trixie's base, apt 3 and its sqv
// signature check). PKG_CHECK_SUITES=trixie narrows a run to one.
const SUITES = (process.env.PKG_CHECK_SUITES ?? 'bookworm trixie').split(' ').filter(Boolean);
const KEY = 'pkg-check-api-key-7f3a';
const SECRET = 'pkg-check-webhook-secret-91c2';
const started = Date.now();
const children = new Set();

const say = (text) => process.stderr.write(`package-check [${((Date.now() - started) / 1000).toFixed(1)} s]: ${text}\n`);
class CheckFailed extends Error {}
function expect(ok, what, detail = '') {
  if (!ok) throw new CheckFailed(`${what}${detail ? `\n${detail}` : ''}`);
  say(`ok: ${what}`);
}

function sh(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', ...opts });
  if (r.error) throw r.error;
  return { code: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}`, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

/**
 * A loopback port below the kernel's ephemeral range, as the tests take theirs: one from the range
 * can be given to an outgoing connection (the agent retrying towards a dead broker) before the
 * agent or broker it was meant for binds it (bench/lib/ports.ts). Built with the rest (dist/).
 */
async function freePort() {
  const ports = await import(pathToFileURL(join(ROOT, 'dist', 'bench', 'lib', 'ports.js')).href);
  return ports.freePort();
}

async function waitFor(check, what, timeoutMs = 60_000) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch {
      // not yet
    }
    if (performance.now() > deadline) throw new CheckFailed(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const portOpen = (port) =>
  new Promise((res) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), res(true)));
    s.once('error', () => res(false));
  });

/** A long-running process whose output is kept; killed at exit if still running. */
function daemon(cmd, args, opts = {}) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  children.add(child);
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const exited = new Promise((res) => child.once('exit', (code, signal) => (children.delete(child), res(code ?? signal))));
  return { child, exited, output: () => output };
}

async function mosquitto() {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'pkgcheck-mosq-'));
  writeFileSync(join(dir, 'm.conf'), `listener ${port} 127.0.0.1\nallow_anonymous true\npersistence false\n`);
  const bin = ['/usr/sbin/mosquitto', '/usr/bin/mosquitto'].find((p) => existsSync(p));
  if (!bin) throw new CheckFailed('mosquitto is not installed (apt install mosquitto)');
  const d = daemon(bin, ['-c', join(dir, 'm.conf')]);
  await waitFor(() => portOpen(port), 'mosquitto');
  return {
    port,
    url: `mqtt://127.0.0.1:${port}`,
    stop: () => {
      d.child.kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function simulator(webhookPort) {
  const port = await freePort();
  const args = [MAIN, 'simulate', '--port', String(port), '--api-key', KEY, '--chairs', '2', '--minute-seconds', '2'];
  if (webhookPort) args.push('--webhook-url', `http://127.0.0.1:${webhookPort}/vendor/webhook`, '--webhook-secret', SECRET);
  const d = daemon(process.execPath, args);
  await waitFor(() => portOpen(port), 'the vendor simulator');
  return { port, url: `http://127.0.0.1:${port}`, stop: () => d.child.kill('SIGTERM') };
}

function siteConfig({ site, simUrl, brokerUrl, httpPort, dbPath, withKey }) {
  return `site: {id: ${site}}
vendor: {baseUrl: "${simUrl}", ${withKey ? `apiKey: ${KEY}, ` : ''}pollSeconds: 1}
${withKey ? `webhook: {channelSecret: ${SECRET}}\n` : ''}http: {host: 127.0.0.1, port: ${httpPort}}
mqtt: {url: "${brokerUrl}"}
storage: {path: ${dbPath}}
gpio:
  driver: sim
  statusLed: 5
  chairs:
    - {deviceId: MC7001, button: 17, led: 27}
    - {deviceId: MC7002, button: 22, led: 23}
`;
}

async function subscriber(url, filter) {
  const client = await mqtt.connectAsync(url, { reconnectPeriod: 200 });
  const messages = [];
  client.on('message', (topic, payload, packet) => messages.push({ topic, text: payload.toString(), retain: packet.retain }));
  await client.subscribeAsync(filter, { qos: 1 });
  return { messages, find: (pred) => messages.find(pred), close: () => client.endAsync(true) };
}

async function postWebhook(port, record) {
  const body = JSON.stringify(record);
  const res = await fetch(`http://127.0.0.1:${port}/vendor/webhook`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-vendor-signature': createHmac('sha256', SECRET).update(body).digest('base64') },
    body,
  });
  await res.body?.cancel();
  return res.status;
}

const txRecord = (id) => ({
  TransactionId: id,
  TransactionCode: 'C01-1',
  TransactionTime: '2026-11-22 14:00:00',
  Location: 'Ladprao Mall',
  Status: 'playing',
  Amount: '150.10',
  PlayTime: '5',
  MassageChair: 'C01',
  Label: null,
  DeviceId: 'MC7001',
  PaymentMethod: 'promptpay',
  PaymentReference: 'PP1',
});

/** Runs the agent, then a webhook, a button press and SIGTERM; `cmd` says how it is started. */
async function exerciseAgent({ label, cmd, args, env, opts, site, broker, httpPort, outbox }) {
  const sub = await subscriber(broker.url, `chair-agent/${site}/#`);
  try {
    const agent = daemon(cmd, args, { env: { PATH: process.env.PATH, ...env }, ...opts });
    await waitFor(() => sub.find((m) => m.topic === `chair-agent/${site}/chairs/MC7001`), `${label}: the state of MC7001`, 120_000);
    const state = JSON.parse(sub.find((m) => m.topic === `chair-agent/${site}/chairs/MC7001`).text);
    expect(state.deviceId === 'MC7001' && state.status === 'Available', `${label}: the agent publishes chair states to Mosquitto`);
    await waitFor(() => sub.find((m) => m.topic === `chair-agent/${site}/bridge/state` && m.text.includes('online')), `${label}: bridge/state online`);

    const id = `PKG-${label}-${Date.now()}`;
    expect((await postWebhook(httpPort, txRecord(id))) === 200, `${label}: a signed webhook is answered 200 after its commit`);
    const tx = await waitFor(() => sub.find((m) => m.topic === `chair-agent/${site}/transactions/MC7001` && m.text.includes(id)), `${label}: the transaction over MQTT`);
    expect(JSON.parse(tx.text).agent?.source === 'webhook' && tx.text.includes('"150.10"'), `${label}: the stored transaction is delivered over MQTT, fields verbatim`);

    const press = await fetch(`http://127.0.0.1:${httpPort}/sim/gpio/17/press`, { method: 'POST' });
    expect(press.status === 200, `${label}: a button press on simulated GPIO`);
    await waitFor(
      () => sub.messages.some((m) => m.topic === `chair-agent/${site}/chairs/MC7001` && JSON.parse(m.text).running === true),
      `${label}: MC7001 running after the press`,
    );
    expect(true, `${label}: the press started MC7001 (one control call, confirmed by its status)`);

    // Delivered marks are committed in batches, a moment after the PUBACK.
    const backlog = await waitFor(() => {
      const b = JSON.parse(outbox());
      return b.pending === 0 && b.delivered >= 1 ? b : null;
    }, `${label}: outbox shows the record delivered`);
    expect(backlog.pending === 0 && backlog.delivered >= 1, `${label}: outbox shows the record delivered`, JSON.stringify(backlog));
    agent.child.kill('SIGTERM');
    const code = await agent.exited;
    expect(code === 0, `${label}: SIGTERM stops it cleanly (exit 0)`, agent.output().slice(-2000));
    await waitFor(() => sub.messages.some((m) => m.topic === `chair-agent/${site}/bridge/state` && m.text.includes('offline')), `${label}: bridge/state offline`);
  } finally {
    await sub.close();
  }
}

async function checkArm64() {
  const tarball = join(PKG, `chair-agent-${VERSION}-linux-arm64.tar.gz`);
  expect(existsSync(tarball), `${tarball} exists`);
  if (sh('sh', ['-c', 'command -v qemu-aarch64-static']).code !== 0) throw new CheckFailed('qemu-aarch64-static is missing (apt install qemu-user-static libc6-arm64-cross libstdc++6-arm64-cross)');
  const dir = mkdtempSync(join(tmpdir(), 'pkgcheck-arm64-'));
  sh('tar', ['-xzf', tarball, '-C', dir]);
  const top = join(dir, 'chair-agent');
  const node = join(top, 'runtime', 'bin', 'node');
  const entry = join(top, 'app', 'dist', 'agent', 'main.js');
  const elf = readFileSync(node);
  expect(elf.readUInt32BE(0) === 0x7f454c46 && elf.readUInt16LE(18) === 0xb7, 'the tarball carries an aarch64 (ELF machine 183) Node runtime');
  const v = sh(QEMU[0], [...QEMU.slice(1), node, '-e', CPU_PROBE]);
  expect(v.code === 0 && /^arm64 v\S+ no-lse$/.test(v.stdout.trim()), `its runtime runs under qemu on a Cortex-A72, ARMv8.0-A without LSE atomics as on a Pi 4: ${v.stdout.trim()}`, v.out);
  const addon = join(top, 'app', 'native', 'prebuilds', 'linux-arm64', 'chair_gpiod.node');
  const gpiod = sh(QEMU[0], [...QEMU.slice(1), node, '-e', `const g = require(${JSON.stringify(addon)}); try { g.chipInfo('/dev/null') } catch (e) { console.log(Object.keys(g).length, e.code) }`]);
  // qemu-user answers ioctls it does not translate with ENOSYS; a real kernel says ENOTTY for /dev/null.
  expect(/^8 (ENOTTY|ENOSYS)$/.test(gpiod.stdout.trim()), `the gpiod addon (arm64) loads under the bundled runtime and calls the kernel (${gpiod.stdout.trim()})`, gpiod.out);
  const epollLoads = sh(QEMU[0], [...QEMU.slice(1), node, '-e', `require(${JSON.stringify(join(top, 'app', 'node_modules', 'epoll'))}); console.log('ok')`]);
  expect(epollLoads.stdout.trim() === 'ok', "onoff's epoll (arm64, built for the bundled runtime) loads", epollLoads.out);
  const launcher = readFileSync(join(top, 'bin', 'chair-agent'), 'utf8');
  expect(launcher.includes('/lib/ld-linux-aarch64.so.1') && launcher.includes('runtime/bin/node'), 'bin/chair-agent runs runtime/bin/node and refuses a 32-bit system');

  const broker = await mosquitto();
  const httpPort = await freePort();
  const sim = await simulator();
  try {
    const config = join(dir, 'config.yaml');
    writeFileSync(config, siteConfig({ site: 'qemu-arm64', simUrl: sim.url, brokerUrl: broker.url, httpPort, dbPath: join(dir, 'agent.db'), withKey: true }));
    const check = sh(QEMU[0], [...QEMU.slice(1), node, entry, 'check', '--config', config]);
    expect(check.code === 0 && check.stdout.includes('apiKey: "********"') && !check.out.includes(KEY), 'arm64: check validates the config and masks the key', check.out);
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'site: {id: "Bad Site"}\nvendor: {baseUrl: nope}\n');
    const badCheck = sh(QEMU[0], [...QEMU.slice(1), node, entry, 'check', '--config', bad]);
    expect(badCheck.code === 78 && badCheck.stderr.includes('site.id:') && badCheck.stderr.includes('vendor.baseUrl:'), 'arm64: a bad config exits 78 naming each key', badCheck.out);
    await exerciseAgent({
      label: 'arm64',
      cmd: QEMU[0],
      args: [...QEMU.slice(1), node, entry, 'run', '--config', config],
      site: 'qemu-arm64',
      broker,
      sim,
      httpPort,
      outbox: () => sh(QEMU[0], [...QEMU.slice(1), node, entry, 'outbox', '--json', '--config', config]).stdout,
    });
  } finally {
    sim.stop();
    broker.stop();
  }
  rmSync(dir, { recursive: true, force: true });
}

/**
 * A pristine Debian minbase root (bookworm: 12, trixie: 13) with its updates and security updates,
 * as a box installed today has it, made by scripts/debian-root.sh and kept a day as a tarball.
 */
function debianRoot(suite = 'bookworm') {
  const tarball = join(CACHE, `rootfs-${suite}-amd64.tar`);
  // Older than a day, it is made again: its package lists would be stale against the mirror.
  if (!existsSync(tarball) || Date.now() - statSync(tarball).mtimeMs > 86_400_000) {
    if (sh('sh', ['-c', 'command -v mmdebstrap']).code !== 0) throw new CheckFailed('mmdebstrap is missing (apt install mmdebstrap)');
    const build = mkdtempSync(join(tmpdir(), 'pkgcheck-root-'));
    say(`a Debian ${suite} minbase root with its updates (kept a day in ${CACHE})`);
    const r = sh('bash', [join(ROOT, 'scripts', 'debian-root.sh'), suite, 'amd64', build]);
    if (r.code !== 0) throw new CheckFailed(`scripts/debian-root.sh failed:\n${r.out.slice(-2000)}`);
    mkdirSync(CACHE, { recursive: true });
    sh('tar', ['-cf', tarball, '-C', build, '.']);
    rmSync(build, { recursive: true, force: true });
  }
  const root = mkdtempSync(join(tmpdir(), 'pkgcheck-rootfs-'));
  sh('tar', ['-xf', tarball, '-C', root]);
  chmodSync(root, 0o755); // its "/" (the temporary directories were 0700)
  return root;
}

/**
 * 32-bit Raspberry Pi OS has arm64 enabled as a foreign architecture, and `apt install
 * ./chair-agent_<v>_arm64.deb` there replaced the site's mosquitto with mosquitto:arm64 (and 26
 * more arm64 packages) before the preinst refused. The same here, one architecture over: this
 * amd64 root with i386 enabled, mosquitto installed, and the package rebuilt as i386. apt must
 * install nothing, replace nothing, and the preinst must say what to install instead.
 */
async function checkForeignArchitecture(root, inRoot, deb) {
  cpSync('/etc/resolv.conf', join(root, 'etc/resolv.conf'));
  const env = { DEBIAN_FRONTEND: 'noninteractive' };
  const setup = inRoot(['sh', '-c', 'dpkg --add-architecture i386 && apt-get update -qq && apt-get install -y -qq --no-install-recommends mosquitto'], { env });
  if (setup.code !== 0) throw new CheckFailed(`could not set up the foreign-architecture root (needs Debian's mirror):\n${setup.out.slice(-2000)}`);
  const i386 = variantDeb(root, deb, 'chair-agent-i386.deb', (dir) => {
    const control = join(dir, 'DEBIAN', 'control');
    writeFileSync(control, readFileSync(control, 'utf8').replace(/^Architecture: .*$/m, 'Architecture: i386'));
    const preinst = join(dir, 'DEBIAN', 'preinst');
    writeFileSync(preinst, readFileSync(preinst, 'utf8').replaceAll('"amd64"', '"i386"').replaceAll('for amd64 ', 'for i386 '));
  });
  // Every package dpkg has in any state but "not installed" (a refused install leaves a "not-installed" entry).
  const state = () => inRoot(['dpkg-query', '-W', '-f=${Package}:${Architecture} ${Status}\n']).stdout.split('\n').filter((l) => l && !l.endsWith(' not-installed')).sort().join('\n');
  const before = state();
  const plan = inRoot(['apt-get', 'install', '-s', '-y', `/tmp/${i386}`], { env });
  expect(/^Inst chair-agent/m.test(plan.out) && !/^(Inst|Remv) (?!chair-agent)/m.test(plan.out), 'apt plans to install or remove nothing but chair-agent itself', plan.out.slice(-3000));
  const apt = inRoot(['apt-get', 'install', '-y', `/tmp/${i386}`], { input: '', env });
  expect(apt.code !== 0 && apt.out.includes('this package is for i386 and this system is amd64; nothing was changed') && apt.out.includes('install chair-agent_<version>_amd64.deb on this machine'), 'the package for a foreign-enabled architecture is refused by its preinst, saying what to install instead', apt.out.slice(-3000));
  const after = state();
  expect(after === before, 'no package was installed, removed or replaced', `before:\n${before}\nafter:\n${after}`);
  expect(/^mosquitto:amd64 install ok installed$/m.test(after) && !/:i386 install ok/m.test(after), "the site's mosquitto is still amd64's, and nothing of i386 is installed");
}

/** A variant of a .deb (another version or layout), built into the root's /tmp; returns its file name. */
function variantDeb(root, deb, name, edit) {
  const dir = mkdtempSync(join(tmpdir(), 'pkgcheck-variant-'));
  rmSync(dir, { recursive: true });
  sh('dpkg-deb', ['-R', deb, dir]);
  edit(dir);
  const r = sh('dpkg-deb', ['--root-owner-group', '-Zgzip', '-z1', '-b', dir, join(root, 'tmp', name)]);
  if (r.code !== 0) throw new CheckFailed(`dpkg-deb -b ${name}: ${r.out}`);
  rmSync(dir, { recursive: true, force: true });
  return name;
}

async function checkDeb(suite) {
  if (process.getuid?.() !== 0) throw new CheckFailed('the deb check needs root (chroot, apt)');
  const deb = join(PKG, `chair-agent_${VERSION}_amd64.deb`);
  expect(existsSync(deb), `${deb} exists`);
  say(`the .deb on a fresh Debian ${suite} root`);
  const root = debianRoot(suite);
  const mounted = sh('mount', ['-t', 'proc', 'proc', join(root, 'proc')]).code === 0;
  const inRoot = (args, opts = {}) => sh('chroot', [...(opts.user ? [`--userspec=${opts.user}`] : []), root, ...args], { input: opts.input, env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', HOME: '/root', LANG: 'C.UTF-8', ...opts.env } });
  // lstat: a symlink in the root (/usr/bin/chair-agent -> /opt/...) must not be followed on this machine.
  const present = (p) => {
    try {
      lstatSync(join(root, p));
      return true;
    } catch {
      return false;
    }
  };
  const mode = (p) => {
    const st = statSync(join(root, p));
    return `${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid}`;
  };
  const ids = () => {
    const line = readFileSync(join(root, 'etc/passwd'), 'utf8').split('\n').find((l) => l.startsWith('chair-agent:'));
    return line ? { uid: Number(line.split(':')[2]), gid: Number(line.split(':')[3]) } : null;
  };
  const broker = await mosquitto();
  const httpPort = await freePort();
  const sim = await simulator();
  try {
    // The release before this one, as sites have it: /etc/chair-agent/config.yaml shipped as a
    // dpkg conffile (whose example then changed), which made every unattended upgrade stop at
    // dpkg's conffile prompt. Built from this package with the old layout and version.
    const previous = variantDeb(root, deb, 'chair-agent-previous.deb', (dir) => {
      const control = join(dir, 'DEBIAN', 'control');
      writeFileSync(control, readFileSync(control, 'utf8').replace(/^Version: .*$/m, 'Version: 0.1.0'));
      mkdirSync(join(dir, 'etc', 'chair-agent'), { recursive: true });
      writeFileSync(join(dir, 'etc', 'chair-agent', 'config.yaml'), `# chair-agent 0.1.0 example\n${readFileSync(join(ROOT, 'config', 'config.example.yaml'), 'utf8')}`);
      writeFileSync(join(dir, 'DEBIAN', 'conffiles'), '/etc/chair-agent/config.yaml\n');
    });
    const apt = inRoot(['apt-get', 'install', '-y', '--no-install-recommends', `/tmp/${previous}`], { env: { DEBIAN_FRONTEND: 'noninteractive' } });
    expect(apt.code === 0, 'apt install of the previous release (0.1.0, config as a conffile)', apt.out.slice(-3000));
    expect(apt.out.includes('chair-agent secrets set vendor-api-key') && apt.out.includes('systemd is not running here'), 'the install says what to do next, and does not start with an incomplete config');
    const svc = ids();
    expect(svc !== null && /^gpio:x:\d+:.*chair-agent/m.test(readFileSync(join(root, 'etc/group'), 'utf8')), 'it created the system user chair-agent in group gpio');

    // The installer's steps, as the README gives them; the broker is not there yet.
    const deadBroker = `mqtt://127.0.0.1:${await freePort()}`;
    writeFileSync(join(root, 'etc/chair-agent/config.yaml'), siteConfig({ site: 'deb-amd64', simUrl: sim.url, brokerUrl: deadBroker, httpPort, dbPath: '/var/lib/chair-agent/agent.db', withKey: false }));
    expect(inRoot(['chair-agent', 'secrets', 'set', 'vendor-api-key'], { input: `${KEY}\n` }).code === 0, 'sudo chair-agent secrets set vendor-api-key (from stdin)');
    expect(inRoot(['chair-agent', 'secrets', 'set', 'webhook-secret'], { input: SECRET }).code === 0, 'sudo chair-agent secrets set webhook-secret');

    // The service as systemd runs it: the service user, the credentials handed over by LoadCredential=.
    const creds = join(root, 'run/credentials/chair-agent.service');
    mkdirSync(creds, { recursive: true });
    for (const n of ['vendor-api-key', 'webhook-secret']) cpSync(join(root, 'etc/chair-agent/credentials', n), join(creds, n));
    sh('chown', ['-R', `${svc.uid}:${svc.gid}`, creds]);
    chmodSync(creds, 0o500);
    const serviceArgs = [`--userspec=${svc.uid}:${svc.gid}`, root, '/opt/chair-agent/bin/chair-agent', 'run', '--config', '/etc/chair-agent/config.yaml'];
    const serviceEnv = { PATH: process.env.PATH, CREDENTIALS_DIRECTORY: '/run/credentials/chair-agent.service' };

    // Transactions arrive while the broker is away: they wait in the database across the upgrade.
    const waiting = [];
    const old = daemon('chroot', serviceArgs, { env: serviceEnv });
    await waitFor(() => portOpen(httpPort), 'the previous release listening');
    for (let i = 0; i < 3; i++) {
      const id = `PKG-waiting-${i}-${Date.now()}`;
      expect((await postWebhook(httpPort, txRecord(id))) === 200, `webhook ${i + 1} of 3 stored by the previous release, broker away`);
      waiting.push(id);
    }
    old.child.kill('SIGTERM');
    expect((await old.exited) === 0, 'the previous release stops cleanly', old.output().slice(-1500));
    expect(JSON.parse(inRoot(['chair-agent', 'outbox', '--json']).stdout).pending === 3, 'three transactions wait in the database');

    // The upgrade as Ansible or unattended-upgrades runs it: no terminal, stdin closed, edited config.
    const configBefore = readFileSync(join(root, 'etc/chair-agent/config.yaml'), 'utf8');
    // What the previous release left in systemd's CacheDirectory: Node's code for its own files.
    const staleCache = join(root, 'var/cache/chair-agent/v24.0.0-x64-0000');
    mkdirSync(staleCache, { recursive: true });
    writeFileSync(join(staleCache, 'entry'), 'compiled code of the previous release');
    cpSync(deb, join(root, 'tmp', 'chair-agent.deb'));
    const upgrade = inRoot(['apt-get', 'install', '-y', '--no-install-recommends', '/tmp/chair-agent.deb'], { input: '', env: { DEBIAN_FRONTEND: 'noninteractive' } });
    const installed = inRoot(['dpkg-query', '-W', '-f=${Version} ${Status}', 'chair-agent']).stdout;
    expect(upgrade.code === 0 && installed === `${VERSION} install ok installed`, `an unattended upgrade from 0.1.0 with an edited config runs to the end (${installed})`, upgrade.out.slice(-3000));
    expect(!/conffile|\*\*\* config\.yaml/i.test(upgrade.out), 'no conffile question was asked', upgrade.out.slice(-2000));
    expect(readFileSync(join(root, 'etc/chair-agent/config.yaml'), 'utf8') === configBefore, 'the upgrade kept the edited config');
    expect(!existsSync(join(root, 'etc/chair-agent/config.yaml.dpkg-new')) && !existsSync(join(root, 'etc/chair-agent/config.yaml.dpkg-dist')), 'and left no .dpkg-new or .dpkg-dist beside it');
    expect(readFileSync(join(root, 'etc/chair-agent/credentials/vendor-api-key'), 'utf8').trim() === KEY, 'the upgrade kept the credentials');
    expect(JSON.parse(inRoot(['chair-agent', 'outbox', '--json']).stdout).pending === 3, 'the upgrade kept the three waiting transactions');
    expect(readdirSync(join(root, 'var/cache/chair-agent')).length === 0, "the upgrade emptied the previous release's compile cache", readdirSync(join(root, 'var/cache/chair-agent')).join(' '));
    const conffiles = join(root, 'var/lib/dpkg/info/chair-agent.conffiles');
    expect(!existsSync(conffiles) || !readFileSync(conffiles, 'utf8').includes('/etc/chair-agent/config.yaml'), 'the config is no longer a conffile of the new package');
    expect(present('usr/share/doc/chair-agent/config.example.yaml') && present('usr/share/doc/chair-agent/changelog.gz'), 'the example config and the changelog are in /usr/share/doc/chair-agent');
    const changelog = inRoot(['sh', '-c', 'zcat /usr/share/doc/chair-agent/changelog.gz | head -1']).stdout.trim();
    expect(changelog === `chair-agent (${VERSION}) stable; urgency=medium`, `the Debian changelog names this build: ${changelog}`);
    expect(mode('etc/chair-agent') === `750 0:${svc.gid}` && mode('etc/chair-agent/config.yaml') === `640 0:${svc.gid}`, '/etc/chair-agent and its config: root:chair-agent 0750/0640');
    expect(mode('etc/chair-agent/credentials') === '700 0:0' && mode('etc/chair-agent/credentials/vendor-api-key') === '600 0:0', 'credentials: root only (0700, files 0600)');
    expect(mode('var/lib/chair-agent') === `750 ${svc.uid}:${svc.gid}`, '/var/lib/chair-agent belongs to the service user');
    expect(present('usr/lib/systemd/system/chair-agent.service') && present('etc/systemd/system/multi-user.target.wants/chair-agent.service'), 'the unit is installed and enabled');
    expect(present('usr/lib/udev/rules.d/60-chair-agent-gpio.rules'), 'the GPIO udev rule is installed (/dev/gpiochip* to group gpio)');
    const ver = inRoot(['chair-agent', '--version']);
    expect(ver.code === 0 && ver.stdout.trim() === VERSION, `/usr/bin/chair-agent runs on the bundled runtime and prints this build's version (${ver.stdout.trim()})`, ver.out);

    writeFileSync(join(root, 'etc/chair-agent/config.yaml'), configBefore.replace(deadBroker, broker.url));
    const check = inRoot(['chair-agent', 'check']);
    expect(check.code === 0 && check.stdout.includes('(credential vendor-api-key)') && !check.out.includes(KEY), 'sudo chair-agent check reads the stored secrets and masks them', check.out);
    const asUser = inRoot(['chair-agent', 'check'], { user: 'nobody:nogroup' });
    expect(asUser.code === 78 && asUser.stderr.trim().split('\n').length === 1 && asUser.stderr.includes('run it as root: sudo chair-agent check'), 'a user who may not read the config gets one line naming sudo', asUser.out);
    const list = inRoot(['chair-agent', 'secrets', 'list'], { user: 'nobody:nogroup' });
    expect(list.code === 1 && list.stdout === '' && list.stderr.includes('run it as root'), 'secrets list without root says it cannot read them (exit 1), not "not set"', list.out);
    const doctor = inRoot(['chair-agent', 'doctor']);
    expect(/ok\s+vendor API/.test(doctor.stdout) && /ok\s+broker/.test(doctor.stdout) && /ok\s+config/.test(doctor.stdout) && !doctor.out.includes(KEY), 'sudo chair-agent doctor: config, vendor API with the key, broker', doctor.out);

    // The new version delivers what waited, and works end to end.
    const early = await subscriber(broker.url, 'chair-agent/deb-amd64/transactions/#');
    await exerciseAgent({ label: 'deb', cmd: 'chroot', args: serviceArgs, env: serviceEnv, site: 'deb-amd64', broker, sim, httpPort, outbox: () => inRoot(['chair-agent', 'outbox', '--json']).stdout });
    const delivered = waiting.filter((id) => early.messages.some((m) => m.text.includes(id)));
    await early.close();
    expect(delivered.length === 3, `the upgraded agent delivered every transaction that waited (${delivered.length} of 3)`);

    // The next build upgrades this one the same way.
    const next = variantDeb(root, deb, 'chair-agent-next.deb', (dir) => {
      const control = join(dir, 'DEBIAN', 'control');
      writeFileSync(control, readFileSync(control, 'utf8').replace(/^Version: .*$/m, `Version: ${VERSION}.1`));
    });
    const again = inRoot(['apt-get', 'install', '-y', '--no-install-recommends', `/tmp/${next}`], { input: '', env: { DEBIAN_FRONTEND: 'noninteractive' } });
    expect(again.code === 0 && inRoot(['dpkg-query', '-W', '-f=${Version}', 'chair-agent']).stdout === `${VERSION}.1`, 'a newer build upgrades this one, unattended', again.out.slice(-2000));

    // Undelivered records at removal: the purge says how many it deletes.
    const pend = daemon('chroot', serviceArgs, { env: serviceEnv });
    await waitFor(() => portOpen(httpPort), 'the agent listening');
    broker.stop();
    await waitFor(async () => !(await portOpen(broker.port)), 'the broker gone');
    expect((await postWebhook(httpPort, txRecord(`PKG-purged-${Date.now()}`))) === 200, 'a webhook stored with the broker gone');
    pend.child.kill('SIGTERM');
    await pend.exited;
    const remove = inRoot(['apt-get', 'remove', '-y', 'chair-agent'], { env: { DEBIAN_FRONTEND: 'noninteractive' } });
    expect(remove.code === 0 && !present('opt/chair-agent') && !present('usr/bin/chair-agent') && !present('usr/lib/systemd/system/chair-agent.service'), 'apt remove removes the program', remove.out.slice(-2000));
    expect(present('etc/chair-agent/config.yaml') && present('etc/chair-agent/credentials/vendor-api-key') && present('var/lib/chair-agent/agent.db') && ids() !== null, 'apt remove keeps config, credentials, data and the user');
    const purge = inRoot(['apt-get', 'purge', '-y', 'chair-agent'], { env: { DEBIAN_FRONTEND: 'noninteractive' } });
    expect(purge.code === 0 && !present('etc/chair-agent') && !present('var/lib/chair-agent') && !present('etc/systemd/system/multi-user.target.wants/chair-agent.service'), 'apt purge removes config, credentials and data', purge.out.slice(-2000));
    expect(/purge deleted the database with 1 transaction\(s\) the broker had not acknowledged yet/.test(purge.out), 'and says how many undelivered transactions went with the database', purge.out.slice(-1500));
    expect(ids() !== null, 'apt purge keeps the system user chair-agent (Debian practice)');

    // The tarball, for systems without dpkg: unpacked in /opt, then lib/setup.sh.
    const tarball = join(PKG, `chair-agent-${VERSION}-linux-amd64.tar.gz`);
    mkdirSync(join(root, 'opt'), { recursive: true });
    expect(sh('tar', ['-xzf', tarball, '-C', join(root, 'opt')]).code === 0, 'the amd64 tarball unpacks in /opt');
    const setup = inRoot(['/opt/chair-agent/lib/setup.sh']);
    expect(setup.code === 0 && ids() !== null && present('etc/systemd/system/chair-agent.service') && present('etc/udev/rules.d/60-chair-agent-gpio.rules') && present('usr/local/bin/chair-agent') && mode('etc/chair-agent/config.yaml') === `640 0:${ids().gid}`, 'lib/setup.sh sets up user, config, credentials, unit, the GPIO udev rule and /usr/local/bin/chair-agent', setup.out);
    expect(inRoot(['chair-agent', '--version']).stdout.trim() === VERSION, 'the tarball install runs');

    const arm = join(PKG, `chair-agent_${VERSION}_arm64.deb`);
    if (existsSync(arm)) {
      cpSync(arm, join(root, 'tmp', 'arm64.deb'));
      const refused = inRoot(['dpkg', '-i', '/tmp/arm64.deb']);
      expect(refused.code !== 0 && /architecture \(arm64\) does not match system \(amd64\)/.test(refused.out), 'the arm64 .deb is refused by dpkg on another architecture', refused.out);
    }
    await checkForeignArchitecture(root, inRoot, deb);
  } finally {
    sim.stop();
    broker.stop();
    if (mounted) sh('umount', ['-l', join(root, 'proc')]);
  }
  rmSync(root, { recursive: true, force: true });
}

/**
 * The fleet's apt repository (scripts/pkg/apt-repo.mjs, `npm run package -- --apt-repo`): signed
 * with a key made here, served over loopback HTTP, added to a fresh Debian 12 root with the one
 * line of docs/FLEET.md; install, then a newer build published to stable reaches the box by an
 * unattended `apt-get upgrade`, and one published to canary only does not.
 */
async function checkRepo(suite) {
  if (process.getuid?.() !== 0) throw new CheckFailed('the repository check needs root (chroot, apt)');
  for (const tool of ['reprepro', 'gpg']) if (sh('sh', ['-c', `command -v ${tool}`]).code !== 0) throw new CheckFailed(`${tool} is missing (apt install reprepro gnupg)`);
  const { publishAptRepo } = await import('./pkg/apt-repo.mjs');
  const deb = join(PKG, `chair-agent_${VERSION}_amd64.deb`);
  const work = mkdtempSync(join(tmpdir(), 'pkgcheck-repo-'));
  mkdirSync(join(work, 'tmp'));
  const gnupg = join(work, 'gnupg');
  mkdirSync(gnupg, { mode: 0o700 });
  process.env.GNUPGHOME = gnupg;
  const gen = sh('gpg', ['--batch', '--passphrase', '', '--quick-gen-key', 'chair-agent fleet (package check) <fleet@chair-agent.dev>', 'ed25519', 'sign', 'never']);
  expect(gen.code === 0, 'a signing key for the fleet (gpg)', gen.out);
  const fpr = /^fpr:+([0-9A-F]{40}):/m.exec(sh('gpg', ['--batch', '--with-colons', '--list-secret-keys']).stdout)?.[1];
  const repo = join(work, 'repo');
  publishAptRepo({ dir: repo, suite: 'stable', debs: [deb], signWith: fpr });
  expect(existsSync(join(repo, 'dists', 'stable', 'InRelease')) && existsSync(join(repo, 'chair-agent.asc')), 'the stable suite is published and signed (InRelease), with the public key beside it');

  // A web server of its own process: the chroot's apt runs while this one waits in spawnSync.
  const port = await freePort();
  const server = daemon('python3', ['-m', 'http.server', String(port), '--bind', '127.0.0.1', '--directory', repo]);
  await waitFor(() => portOpen(port), 'the repository served on loopback');
  const url = `http://127.0.0.1:${port}`;
  say(`the fleet's apt repository on a fresh Debian ${suite} root`);
  const root = debianRoot(suite);
  const mounted = sh('mount', ['-t', 'proc', 'proc', join(root, 'proc')]).code === 0;
  const inRoot = (args, opts = {}) => sh('chroot', [root, ...args], { input: opts.input ?? '', env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', HOME: '/root', LANG: 'C.UTF-8', DEBIAN_FRONTEND: 'noninteractive' } });
  try {
    // docs/FLEET.md's line, with the key fetched from where the repository is served.
    mkdirSync(join(root, 'etc/apt/keyrings'), { recursive: true });
    writeFileSync(join(root, 'etc/apt/keyrings/chair-agent.asc'), readFileSync(join(repo, 'chair-agent.asc')));
    writeFileSync(join(root, 'etc/apt/sources.list.d/chair-agent.list'), `deb [signed-by=/etc/apt/keyrings/chair-agent.asc] ${url} stable main\n`);
    const update = inRoot(['apt-get', 'update']);
    expect(update.code === 0 && !/NO_PUBKEY|not signed|Err:|^W: /m.test(update.out), 'apt-get update trusts the signed repository, without a warning', update.out.slice(-2000));
    const install = inRoot(['apt-get', 'install', '-y', '--no-install-recommends', 'chair-agent']);
    const version = () => inRoot(['dpkg-query', '-W', '-f=${Version}', 'chair-agent']).stdout;
    expect(install.code === 0 && version() === VERSION, `apt-get install chair-agent from the repository (${version()})`, install.out.slice(-2000));

    const newer = variantDeb(work, deb, 'chair-agent-newer.deb', (dir) => {
      const control = join(dir, 'DEBIAN', 'control');
      writeFileSync(control, readFileSync(control, 'utf8').replace(/^Version: .*$/m, `Version: ${VERSION}.1`));
    });
    publishAptRepo({ dir: repo, suite: 'canary', debs: [join(work, 'tmp', newer)], signWith: fpr });
    const canaryOnly = inRoot(['sh', '-c', 'apt-get update -qq && apt-get upgrade -y']);
    expect(canaryOnly.code === 0 && version() === VERSION, 'a build published to canary only does not reach a stable box', canaryOnly.out.slice(-1500));
    publishAptRepo({ dir: repo, suite: 'stable', debs: [join(work, 'tmp', newer)], signWith: fpr });
    const upgrade = inRoot(['sh', '-c', 'apt-get update -qq && apt-get upgrade -y']);
    expect(upgrade.code === 0 && version() === `${VERSION}.1`, `promoted to stable, it arrives by an unattended apt-get upgrade (${version()})`, upgrade.out.slice(-2000));
  } finally {
    server.child.kill('SIGTERM');
    if (mounted) sh('umount', ['-l', join(root, 'proc')]);
    rmSync(root, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  }
}

/** lintian on both packages: clean apart from the overrides the package carries, each with its reason. */
function checkLintian() {
  if (sh('sh', ['-c', 'command -v lintian']).code !== 0) throw new CheckFailed('lintian is missing (apt install lintian)');
  // lintian leaves its MLDBM cache files (mldbm-elf-*) in TMPDIR: a directory of its own, removed after.
  const tmp = mkdtempSync(join(tmpdir(), 'pkgcheck-lintian-'));
  try {
    for (const arch of ['amd64', 'arm64']) {
      const deb = join(PKG, `chair-agent_${VERSION}_${arch}.deb`);
      if (!existsSync(deb)) continue;
      const r = sh('lintian', ['--tag-display-limit', '0', '--fail-on', 'error,warning', deb], { env: { ...process.env, TMPDIR: tmp } });
      const hints = r.stdout.split('\n').filter((l) => /^[EW]: /.test(l));
      expect(r.code === 0 && hints.length === 0, `lintian: the ${arch} package has no error or warning beyond its reasoned overrides`, hints.join('\n'));
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

const parts = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const want = (p) => parts.length === 0 || parts.includes(p);
try {
  if (!existsSync(MAIN)) throw new CheckFailed('dist/agent/main.js is missing: npm run build');
  if (want('arm64')) await checkArm64();
  if (want('deb')) for (const suite of SUITES) await checkDeb(suite);
  if (want('repo')) for (const suite of SUITES) await checkRepo(suite);
  if (want('lintian')) checkLintian();
  say('all package checks passed');
} catch (err) {
  say(`FAILED: ${err instanceof CheckFailed ? err.message : err.stack}`);
  process.exitCode = 1;
} finally {
  for (const c of children) c.kill('SIGKILL');
}
