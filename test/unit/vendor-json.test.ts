import { describe, expect, it } from 'vitest';
import { parseVerbatim } from '../../agent/vendor/json.js';

const nest = (n: number): string => '{"a":'.repeat(n) + '1' + '}'.repeat(n);

describe('the vendor JSON parser', () => {
  it('gives back every value as sent, compact or not', () => {
    const cases: [string, string][] = [
      ['{"TransactionId":"T1","Amount":"100.00","PlayTime":5,"Label":null,"ok":true}', '{"TransactionId":"T1","Amount":"100.00","PlayTime":5,"Label":null,"ok":true}'],
      ['{"Amount":150.10}', '{"Amount":150.10}'],
      ['{"Amount": 150.1, "n": 1e400}', '{"Amount":150.1,"n":1e400}'],
      ['{"big":9007199254740993}', '{"big":9007199254740993}'],
      ['{"z":-0,"e":1E2}', '{"z":-0,"e":1E2}'],
      ['{"a":1,"a":2}', '{"a":2}'],
      ['{"s":"\\u00e9\\n","list":[1,2.50,{"x":[]}]}', '{"s":"é\\n","list":[1,2.50,{"x":[]}]}'],
    ];
    for (const [text, back] of cases) expect(JSON.stringify(parseVerbatim(text)), text).toBe(back);
  });

  it('refuses what is nested too deep or is not JSON, compact or not', () => {
    expect(JSON.stringify(parseVerbatim(nest(32)))).toBe(nest(32));
    for (const text of [nest(33), nest(5000), '[' + ' [ '.repeat(40) + ']'.repeat(40) + ']']) {
      expect(() => parseVerbatim(text)).toThrow(expect.objectContaining({ code: 'JSON_TOO_DEEP' }));
    }
    for (const text of ['{"a":', '{"a":1}x', 'NaN', '']) {
      expect(() => parseVerbatim(text)).toThrow(expect.objectContaining({ code: 'JSON_INVALID' }));
    }
  });
});
