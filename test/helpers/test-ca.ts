import { spawnSync } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

export interface ServerCertificateOptions {
  /** The private CA's common name (it goes to ca.pem and ca.key). */
  caName: string;
  /** The files' name: <name>.pem and <name>.key. */
  name: string;
  /** The certificate's common name. */
  cn: string;
  /** Its subjectAltName, as openssl takes it: "DNS:localhost,IP:127.0.0.1". */
  altNames: string;
}

/**
 * A private CA and a server certificate it signed, valid two days, in dir: what a central broker
 * or a vendor behind a TLS front presents. Readable by all: Mosquitto and squid, started as root,
 * read them as their own users. Returns the paths.
 */
export function issueServerCertificate(dir: string, o: ServerCertificateOptions): { ca: string; cert: string; key: string } {
  const openssl = (args: string[]): void => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`openssl ${args.slice(0, 2).join(' ')}: ${r.stderr}`);
  };
  openssl(['req', '-x509', ...EC_KEY, '-days', '2', '-subj', `/CN=${o.caName}`, '-keyout', 'ca.key', '-out', 'ca.pem']);
  openssl(['req', ...EC_KEY, '-subj', `/CN=${o.cn}`, '-keyout', `${o.name}.key`, '-out', `${o.name}.csr`]);
  writeFileSync(join(dir, `${o.name}.ext`), `subjectAltName=${o.altNames}\n`);
  openssl(['x509', '-req', '-in', `${o.name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', `${o.name}.ext`, '-out', `${o.name}.pem`]);
  const paths = { ca: join(dir, 'ca.pem'), cert: join(dir, `${o.name}.pem`), key: join(dir, `${o.name}.key`) };
  for (const f of Object.values(paths)) chmodSync(f, 0o644);
  return paths;
}
