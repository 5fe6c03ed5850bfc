import { describe, expect, it } from 'vitest';
import { responseTopicProblem } from '../../agent/mqtt/start-commands.js';
import { Topics } from '../../agent/mqtt/topics.js';

// The agent's own guard, whatever the broker does: Mosquitto 2.0.21 drops a client that sends a
// wildcard response topic before the agent sees it, 2.0.11 and other brokers forward it.
describe('which MQTT 5 response topics the agent answers on', () => {
  const topics = new Topics('chair-agent', 'site-1');

  it.each([
    ['a wildcard #', 'replies/#'],
    ['a wildcard +', 'replies/+/x'],
    ['an empty topic', ''],
    ['a $SYS topic', '$SYS/x'],
    ['a control character', 'pos/\u0000x'],
    ['a lone surrogate', 'pos/\ud800'],
    ['its own transactions', 'chair-agent/site-1/transactions/MC7001'],
    ['its own base topic', 'chair-agent/site-1'],
  ])('refuses %s', (_what, topic) => {
    expect(responseTopicProblem(topic, topics)).toEqual(expect.any(String));
  });

  it.each([
    ['a POS reply topic', 'pos/replies/42'],
    ["another site's namespace", 'chair-agent/site-10/x'],
    ['any script', 'ร้าน/คำตอบ'],
  ])('answers on %s', (_what, topic) => {
    expect(responseTopicProblem(topic, topics)).toBeNull();
  });
});
