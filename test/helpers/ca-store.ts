import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The box's own CA store, made as a site's IT makes it: the CA copied into the local
 * certificates and Debian's update-ca-certificates run, here into `dir` in place of /etc/ssl/certs.
 * `others` are more files for the local certificates, by name: what else a site's IT put there.
 * Returns the environment (OpenSSL's SSL_CERT_FILE and SSL_CERT_DIR) that points a process at it.
 */
export function boxCaStore(dir: string, ca: string, others: Record<string, string> = {}): Record<string, string> {
  for (const sub of ['share', 'local', 'etc', 'hooks']) mkdirSync(join(dir, sub), { recursive: true });
  writeFileSync(join(dir, 'ca-certificates.conf'), '');
  copyFileSync(ca, join(dir, 'local', 'site-ca.crt'));
  for (const [name, text] of Object.entries(others)) writeFileSync(join(dir, 'local', name), text);
  const args = ['--certsconf', join(dir, 'ca-certificates.conf'), '--certsdir', join(dir, 'share'), '--localcertsdir', join(dir, 'local'), '--etccertsdir', join(dir, 'etc'), '--hooksdir', join(dir, 'hooks')];
  // By its path: a user's PATH (the fresh roots' test user) has no /usr/sbin.
  const r = spawnSync('/usr/sbin/update-ca-certificates', args, { encoding: 'utf8' });
  if (!new RegExp(`\\b${1 + Object.keys(others).length} added`).test(r.stdout ?? '')) throw new Error(`update-ca-certificates did not add ${ca}: ${r.error?.message ?? ''}${r.stdout ?? ''}${r.stderr ?? ''}`);
  return { SSL_CERT_FILE: join(dir, 'etc', 'ca-certificates.crt'), SSL_CERT_DIR: join(dir, 'etc') };
}
