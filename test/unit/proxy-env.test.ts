import { describe, expect, it } from 'vitest';
import { proxyFromEnvironment } from '../../agent/config/proxy-env.js';

describe('the proxy the environment names for the vendor (as curl reads it)', () => {
  it('takes https_proxy for an https:// vendor and http_proxy for an http:// one, lower case first', () => {
    const env = { https_proxy: 'http://lower:3128', HTTPS_PROXY: 'http://upper:3128', HTTP_PROXY: 'http://plain:8080' };
    expect(proxyFromEnvironment('https://api.vendor.example', env)).toEqual({ url: 'http://lower:3128', variable: 'https_proxy' });
    expect(proxyFromEnvironment('http://api.vendor.example', env)).toEqual({ url: 'http://plain:8080', variable: 'HTTP_PROXY' });
    expect(proxyFromEnvironment('https://api.vendor.example', { HTTP_PROXY: 'http://plain:8080' })).toBeUndefined();
  });

  it('reads a proxy without a scheme as http://, and an empty variable as none', () => {
    expect(proxyFromEnvironment('https://api.vendor.example', { HTTPS_PROXY: 'proxy.mall.lan:3128' })?.url).toBe('http://proxy.mall.lan:3128');
    expect(proxyFromEnvironment('https://api.vendor.example', { https_proxy: ' ', HTTPS_PROXY: '' })).toBeUndefined();
  });

  it('reaches no_proxy hosts directly: the name, its subdomains, a leading dot, a port, or *', () => {
    const through = (noProxy: string, url = 'https://api.vendor.example'): boolean => proxyFromEnvironment(url, { HTTPS_PROXY: 'http://p:3128', NO_PROXY: noProxy }) !== undefined;
    expect(through('vendor.example')).toBe(false);
    expect(through('.vendor.example')).toBe(false);
    expect(through('localhost, api.vendor.example:443')).toBe(false);
    expect(through('*')).toBe(false);
    expect(through('other.example,xvendor.example')).toBe(true);
    expect(through('127.0.0.1', 'https://127.0.0.1:8443')).toBe(false);
    expect(through('::1', 'https://[::1]:8443')).toBe(false);
  });
});
