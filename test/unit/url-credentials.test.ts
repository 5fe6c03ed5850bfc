import { describe, expect, it } from 'vitest';
import { secretValues } from '../../agent/cli/secrets.js';
import { parseConfig } from '../../agent/config/load.js';
import { endpointOptions } from '../../agent/mqtt/client-options.js';
import { decodeUserinfo, urlCredentials } from '../../agent/platform/url-credentials.js';

// A password in a URL's user:password@ is read as curl reads it (`curl -x http://site:50%off@...`
// is let through by squid's basic auth with the password 50%off; checked by hand against squid
// 5.7 and curl 7.88): %XX is that byte, any other % is itself.

describe("a URL's user:password@", () => {
  it.each([
    ['50%off', '50%off'],
    ['50%25off', '50%off'],
    ['p%40ss%3Aword', 'p@ss:word'],
    ['%', '%'],
    ['100%', '100%'],
    ['%4', '%4'],
    ['%zz%41', '%zzA'],
    ['caf%C3%A9', 'café'],
    ['plain', 'plain'],
  ])('%s is %s', (written, meant) => {
    expect(decodeUserinfo(written)).toBe(meant);
  });

  it('reaches the broker as written: a bare % in mqtt.url passes check and is the password mqtt.js sends', () => {
    const { config } = parseConfig(
      'site: {id: s}\nvendor: {baseUrl: "https://v.example", apiKey: k}\nwebhook: {channelSecret: w}\nmqtt: {url: "mqtt://agent:50%off@broker.lan"}\n',
      'c.yaml',
      { env: {} },
    );
    const options = endpointOptions({ url: config.mqtt.url, protocolVersion: 5, rejectUnauthorized: true });
    expect(options).toMatchObject({ username: 'agent', password: '50%off' });
    // The log scrubber knows the password in both its forms.
    expect(secretValues(config)).toContain('50%off');
  });

  it('has no credentials when the URL has none', () => {
    expect(urlCredentials(new URL('http://proxy.lan:3128'))).toBeNull();
    expect(urlCredentials(new URL('http://site@proxy.lan:3128'))).toEqual({ username: 'site', password: '' });
  });
});
