import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PACKAGED_UNIT, serviceIdentity, unitSettings, type ServiceIdentity } from '../../agent/cli/commands/service-identity.js';
import { kernelProbe, unreadableBy, type Probe } from '../../agent/cli/commands/service-user-access.js';
import { serviceDatabaseCheck, serviceFilesCheck } from '../../agent/cli/commands/doctor.js';
import { parseConfig } from '../../agent/config/load.js';
import { describeWith } from '../helpers/tools.js';

/**
 * `doctor` runs as root and reads a file as the service would: its account, its groups (the
 * account's in /etc/group and the unit's SupplementaryGroups=) and what its sandbox hides. The
 * kernel is asked (setpriv runs `test` as that identity); the mode bits answer where it cannot be.
 */
const dir = mkdtempSync(join(tmpdir(), 'service-access-'));
chmodSync(dir, 0o755);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Ids no account on this machine has: the kernel needs none to exist.
const SSL_CERT = 64_101;
const service = (groups: number[] = [], hidden: ServiceIdentity['hidden'] = [], writable: string[] | null = null, stateDirectories: string[] = []): ServiceIdentity => ({
  name: 'chair-agent',
  uid: 64_100,
  gid: 64_100,
  groups,
  hidden,
  writable,
  stateDirectories,
  readOnlyBy: 'ProtectSystem=strict',
});
const modeBitsOnly: Probe = () => 'unknown';

describeWith('root', 'a file as the service reads it', () => {
  for (const [how, probe] of [['asking the kernel', kernelProbe], ['by the mode bits', modeBitsOnly]] as const) {
    it(`reads a key by a supplementary group, as Debian's ssl-cert group gives it (${how})`, () => {
      // /etc/ssl/private is 0710 root:ssl-cert; a service is put in ssl-cert to read its key there.
      const root = mkdtempSync(join(dir, 'ssl-'));
      chmodSync(root, 0o755);
      const priv = join(root, 'private');
      mkdirSync(priv, { mode: 0o710 });
      chownSync(priv, 0, SSL_CERT);
      const key = join(priv, 'site.key');
      writeFileSync(key, 'key', { mode: 0o640 });
      chownSync(key, 0, SSL_CERT);
      expect(unreadableBy(key, service([SSL_CERT]), probe)).toBeNull();
      expect(unreadableBy(key, service(), probe)).toBe(`${priv} is not searchable by chair-agent`);
      chmodSync(priv, 0o711);
      expect(unreadableBy(key, service(), probe)).toBe(`${key} is not readable by chair-agent`);
    });

    it(`follows a link to the directory it leads to, as certbot's live/ does (${how})`, () => {
      // certbot keeps live/NAME/privkey.pem as a link into archive/, both 0700 root.
      const le = mkdtempSync(join(dir, 'letsencrypt-'));
      chmodSync(le, 0o755);
      const archive = join(le, 'archive');
      const live = join(le, 'live');
      mkdirSync(archive, { mode: 0o700 });
      mkdirSync(live, { mode: 0o755 });
      writeFileSync(join(archive, 'privkey1.pem'), 'key', { mode: 0o640 });
      chownSync(join(archive, 'privkey1.pem'), 0, SSL_CERT);
      symlinkSync('../archive/privkey1.pem', join(live, 'privkey.pem'));
      expect(unreadableBy(join(live, 'privkey.pem'), service([SSL_CERT]), probe)).toBe(`${archive} is not searchable by chair-agent`);
      chmodSync(archive, 0o750);
      chownSync(archive, 0, SSL_CERT);
      expect(unreadableBy(join(live, 'privkey.pem'), service([SSL_CERT]), probe)).toBeNull();
    });
  }

  it('asks the kernel as the service, not as root', () => {
    const file = join(dir, 'root-only');
    writeFileSync(file, 'x', { mode: 0o600 });
    expect(kernelProbe(service(), '-r', file)).toBe(false);
    chmodSync(file, 0o604);
    expect(kernelProbe(service(), '-r', file)).toBe(true);
  });
});

describeWith('root', '`doctor`: the files the service reads at start', () => {
  // The broker's TLS files, which the service reads before it connects: out of its reach, it
  // runs without the broker, while doctor, run as root, reads them.
  const files = (): { ca: string; key: string; cert: string; yaml: string } => {
    const tls = mkdtempSync(join(dir, 'mqtt-tls-'));
    chmodSync(tls, 0o755);
    const [ca, cert, key] = ['ca.crt', 'client.crt', 'client.key'].map((f) => join(tls, f)) as [string, string, string];
    writeFileSync(ca, 'ca', { mode: 0o644 });
    writeFileSync(cert, 'cert', { mode: 0o644 });
    writeFileSync(key, 'key', { mode: 0o640 });
    chownSync(key, 0, 64_100);
    const yaml = `site: {id: x}\nvendor: {baseUrl: "https://x", apiKey: k-1234}\nwebhook: {enabled: false}\nmqtt: {url: "mqtts://broker.example:8883", ca: ${ca}, cert: ${cert}, key: ${key}}\n`;
    return { ca, cert, key, yaml };
  };

  it('passes files the service reads, and names them', () => {
    const f = files();
    const { config } = parseConfig(f.yaml, 'c.yaml', { env: {} });
    expect(serviceFilesCheck(config, 'c.yaml', service())).toEqual([{ name: 'access', ok: true, detail: `chair-agent reads mqtt.ca (${f.ca}), mqtt.cert (${f.cert}), mqtt.key (${f.key})` }]);
  });

  it('fails a file root reads and the service cannot, saying what that stops', () => {
    const f = files();
    const { config } = parseConfig(f.yaml, 'c.yaml', { env: {} });
    chmodSync(f.ca, 0o600);
    expect(serviceFilesCheck(config, 'c.yaml', service())).toMatchObject([{ ok: false, detail: `mqtt.ca: ${f.ca} is not readable by chair-agent, the service's user: the service would run without the broker, its records waiting on disk` }]);
    chmodSync(f.ca, 0o644);
    chmodSync(f.key, 0o644);
    expect(serviceFilesCheck(config, 'c.yaml', service())).toMatchObject([{ ok: false, detail: `mqtt.key: ${f.key} is readable by every user on this box` }]);
  });

  it('checks the config only when it is the one the unit runs with', () => {
    const f = files();
    const path = join(dir, 'not-the-service.yaml');
    writeFileSync(path, f.yaml, { mode: 0o600 });
    const { config } = parseConfig(f.yaml, path, { env: {} });
    expect(serviceFilesCheck(config, path, service())).toMatchObject([{ ok: true }]);
  });
});

describeWith('root', '`doctor`: the database where the service writes it', () => {
  // A USB disk mounted at /data for the SD card's sake: root writes there, the service does not,
  // and it fails at every start until the crash guard stops it.
  const place = (name: string): { data: string; db: string } => {
    const data = join(mkdtempSync(join(dir, `${name}-`)), 'data');
    chmodSync(dirname(data), 0o755);
    mkdirSync(data);
    chmodSync(data, 0o755);
    return { data, db: join(data, 'agent.db') };
  };

  it('fails a database outside what the unit lets the service write, and says how to allow it', () => {
    const { data, db } = place('strict');
    chownSync(data, 64_100, 64_100);
    expect(serviceDatabaseCheck(db, service([], [], ['/var/lib/chair-agent', '/sys/class/gpio']))).toEqual({
      name: 'database',
      ok: false,
      detail: `storage.path ${db}: ${data} is read-only for the service (ProtectSystem=strict: it writes only under /var/lib/chair-agent); the service could store nothing (every webhook answered 503)`,
      hint: `keep the data in /var/lib/chair-agent (a disk mounted there: README, "Read-only root"), or let the service write ${data}: sudo systemctl edit chair-agent, then [Service] ReadWritePaths=${data}`,
    });
    expect(serviceDatabaseCheck(db, service([], [], ['/var/lib/chair-agent', data]))).toBeNull();
  });

  it('fails a directory, or a database file, root made and the service cannot write', () => {
    const { data, db } = place('owner');
    expect(serviceDatabaseCheck(db, service())).toMatchObject({ ok: false, detail: `storage.path ${db}: ${data} is not writable by chair-agent; the service could store nothing (every webhook answered 503)`, hint: `sudo chown -R chair-agent: ${data}` });
    chownSync(data, 64_100, 64_100);
    expect(serviceDatabaseCheck(db, service())).toBeNull();
    writeFileSync(db, '', { mode: 0o600 });
    expect(serviceDatabaseCheck(db, service())).toMatchObject({ ok: false, detail: `storage.path ${db}: ${db} is not writable by chair-agent; the service could store nothing (every webhook answered 503)` });
  });

  it('leaves the state directory to systemd, which hands it to the service at each start', () => {
    const { data, db } = place('state');
    expect(serviceDatabaseCheck(db, service([], [], [data], [data]))).toBeNull();
  });
});

describe('what the service\'s unit hides from it', () => {
  it('names the setting that hides a file under /home or /tmp, though root reads it there', () => {
    const file = join(dir, 'in-home.key');
    writeFileSync(file, 'key', { mode: 0o644 });
    const hidden = [{ dir, by: 'ProtectHome=yes' }];
    expect(unreadableBy(file, service([], hidden))).toBe(`${file} is under ${dir}, which the service's unit hides from it (ProtectHome=yes)`);
  });

  it('leaves a file that is not there to whoever reads it', () => {
    expect(unreadableBy(join(dir, 'absent.key'), service())).toBeNull();
  });
});

describe('who the service runs as', () => {
  const passwd = join(dir, 'passwd');
  const group = join(dir, 'group');
  writeFileSync(passwd, 'root:x:0:0:root:/root:/bin/bash\nchair-agent:x:998:997::/nonexistent:/usr/sbin/nologin\n');
  writeFileSync(group, 'root:x:0:\ngpio:x:993:pi\nssl-cert:x:112:postgres,chair-agent\nchair-agent:x:997:\ndialout:x:20:pi,chair-agent\n');

  it('takes the account\'s groups from /etc/group and the unit\'s SupplementaryGroups=', () => {
    const who = serviceIdentity({ ...PACKAGED_UNIT }, { passwd, group });
    expect(who).toMatchObject({ name: 'chair-agent', uid: 998, gid: 997 });
    expect(who?.groups.sort((a, b) => a - b)).toEqual([20, 112, 993]);
    expect(who?.hidden.map((h) => h.dir)).toEqual(['/home', '/root', '/run/user', '/tmp', '/var/tmp']);
    expect(who?.writable).toEqual(['/var/lib/chair-agent', '/sys/class/gpio', '/sys/devices/platform']);
    expect(who?.stateDirectories).toEqual(['/var/lib/chair-agent']);
  });

  it('follows the unit as installed: its groups, and a sandbox loosened by a drop-in', () => {
    const who = serviceIdentity({ ...PACKAGED_UNIT, SupplementaryGroups: 'gpio nosuchgroup 4000', ProtectHome: 'read-only', PrivateTmp: 'no', ReadWritePaths: '-/sys/class/gpio /data' }, { passwd, group });
    expect(who?.groups.sort((a, b) => a - b)).toEqual([20, 112, 993, 4000]);
    expect(who?.hidden).toEqual([]);
    expect(who?.writable).toEqual(['/var/lib/chair-agent', '/sys/class/gpio', '/data']);
    expect(serviceIdentity({ ...PACKAGED_UNIT, ProtectSystem: 'full' }, { passwd, group })?.writable).toBeNull();
  });

  it('is nobody where the account does not exist (a developer\'s machine)', () => {
    expect(serviceIdentity({ ...PACKAGED_UNIT, User: 'someone-else' }, { passwd, group })).toBeNull();
  });

  it('reads the installed unit from systemctl, and the packaged one where systemd cannot say', () => {
    const fake = (out: string, status = 0): string => {
      const path = join(dir, `systemctl-${Math.random().toString(36).slice(2)}`);
      writeFileSync(path, `#!/bin/sh\nprintf '%s' '${out}'\nexit ${status}\n`, { mode: 0o755 });
      return path;
    };
    const shown = 'User=chair-agent\nGroup=chair-agent\nSupplementaryGroups=gpio ssl-cert\nProtectHome=yes\nPrivateTmp=yes\nProtectSystem=strict\nStateDirectory=chair-agent\nReadWritePaths=-/sys/class/gpio -/sys/devices/platform\nLoadState=loaded\n';
    expect(unitSettings(fake(shown))).toEqual({ ...PACKAGED_UNIT, SupplementaryGroups: 'gpio ssl-cert' });
    expect(unitSettings(fake('LoadState=not-found\nUser=\n'))).toEqual(PACKAGED_UNIT);
    expect(unitSettings(fake('', 1))).toEqual(PACKAGED_UNIT);
    expect(unitSettings(join(dir, 'no-systemctl-here'))).toEqual(PACKAGED_UNIT);
  });

  it('falls back to what the packaged unit really sets', () => {
    const unit = readFileSync(new URL('../../systemd/chair-agent.service', import.meta.url), 'utf8');
    for (const [k, v] of Object.entries(PACKAGED_UNIT)) expect(unit).toMatch(new RegExp(`^${k}=${v}$`, 'm'));
  });
});
