import type { TopicClass } from './refusal-guard.js';
import { createHash } from 'node:crypto';

/** A topic level longer than this (UTF-8 bytes) is shortened and given a hash of the whole. */
export const MAX_LEVEL_BYTES = 200;
const KEEP_BYTES = 180;

/**
 * Characters a DeviceId may hold that must not reach a topic level as they are: MQTT forbids
 * U+0000 and the level separator and wildcards (/, +, #); brokers refuse control characters
 * (C0, DEL, C1) and Unicode noncharacters; a lone surrogate has no UTF-8 form. % is escaped so
 * the escaping can be undone.
 */
function mustEscape(cp: number): boolean {
  return (
    cp <= 0x1f ||
    (cp >= 0x7f && cp <= 0x9f) ||
    cp === 0x25 ||
    cp === 0x2f ||
    cp === 0x2b ||
    cp === 0x23 ||
    (cp >= 0xfdd0 && cp <= 0xfdef) ||
    (cp & 0xfffe) === 0xfffe ||
    (cp >= 0xd800 && cp <= 0xdfff)
  );
}

/** Characters a topic name someone else gives (a response topic) must not have: as above, but / and % are fine. */
function forbiddenInTopic(cp: number): boolean {
  return cp !== 0x25 && cp !== 0x2f && mustEscape(cp);
}

const hex = (b: number): string => `%${b.toString(16).toUpperCase().padStart(2, '0')}`;

/**
 * Every topic the agent uses, from B = baseTopic/siteId.
 *
 * The rule for a DeviceId as a topic level (README, "Topic levels"): each character above is
 * written as its UTF-8 bytes in %XX form, and a lone surrogate (no UTF-8 form) as U+FFFD; an empty id is
 * "%00"; a level still longer than 200 bytes keeps its first 180 bytes (whole characters) and
 * ends in "~" and the first 16 hex digits of the SHA-256 of the DeviceId. Every other character,
 * any script, is kept. The DeviceId itself is always in the payload, verbatim.
 */
export class Topics {
  readonly base: string;

  constructor(baseTopic: string, siteId: string) {
    this.base = `${baseTopic}/${siteId}`;
  }

  static level(deviceId: string): string {
    if (deviceId === '') return '%00';
    let out = '';
    for (const ch of deviceId) {
      const cp = ch.codePointAt(0) as number;
      if (!mustEscape(cp)) out += ch;
      else if (cp >= 0xd800 && cp <= 0xdfff) out += '\ufffd';
      else for (const b of Buffer.from(ch, 'utf8')) out += hex(b);
    }
    if (Buffer.byteLength(out, 'utf8') <= MAX_LEVEL_BYTES) return out;
    let kept = '';
    let bytes = 0;
    for (const ch of out) {
      const n = Buffer.byteLength(ch, 'utf8');
      if (bytes + n > KEEP_BYTES) break;
      kept += ch;
      bytes += n;
    }
    // Do not cut a %XX escape in half.
    kept = kept.replace(/%[0-9A-F]?$/, '');
    return `${kept}~${createHash('sha256').update(deviceId, 'utf8').digest('hex').slice(0, 16)}`;
  }

  /** What a topic this agent publishes carries (refusals are counted by it). */
  classify(topic: string, discoveryPrefix: string): TopicClass {
    const base = `${this.base}/`;
    if (topic.startsWith(`${discoveryPrefix}/`)) return 'discovery';
    if (!topic.startsWith(base)) return 'response'; // an MQTT 5 response topic of the requester's
    const rest = topic.slice(base.length);
    if (rest.startsWith('transactions/')) return 'transaction';
    if (rest.startsWith('bridge/response/')) return 'response';
    if (rest.startsWith('bridge/') || rest === 'summary') return 'bridge';
    if (rest.endsWith('/start/response')) return 'response';
    if (rest.endsWith('/availability')) return 'availability';
    return 'chair';
  }

  get bridgeState(): string {
    return `${this.base}/bridge/state`;
  }

  get bridgeInfo(): string {
    return `${this.base}/bridge/info`;
  }

  /** Today at a glance (retained). */
  get summary(): string {
    return `${this.base}/summary`;
  }

  chair(deviceId: string): string {
    return `${this.base}/chairs/${Topics.level(deviceId)}`;
  }

  availability(deviceId: string): string {
    return `${this.chair(deviceId)}/availability`;
  }

  /** The chair's day (retained): its part of B/summary, on a topic of its own. */
  chairToday(deviceId: string): string {
    return `${this.chair(deviceId)}/today`;
  }

  startResponse(deviceId: string): string {
    return `${this.chair(deviceId)}/start/response`;
  }

  /** Per record while a backlog flushes: a site has a handful of chairs, so kept (bounded). */
  private readonly transactionTopics = new Map<string, string>();

  transaction(deviceId: string): string {
    let topic = this.transactionTopics.get(deviceId);
    if (topic === undefined) {
      topic = `${this.base}/transactions/${Topics.level(deviceId)}`;
      if (this.transactionTopics.size >= 1024) this.transactionTopics.clear();
      this.transactionTopics.set(deviceId, topic);
    }
    return topic;
  }

  get startFilter(): string {
    return `${this.base}/chairs/+/start`;
  }

  /**
   * The DeviceId a start command topic is for: one of `known` whose level it is (the rule above
   * cannot always be undone), else the level with its escapes undone; null when not a start topic.
   */
  startTarget(topic: string, known: readonly string[] = []): string | null {
    const prefix = `${this.base}/chairs/`;
    if (!topic.startsWith(prefix) || !topic.endsWith('/start')) return null;
    const level = topic.slice(prefix.length, -'/start'.length);
    if (level === '' || level.includes('/')) return null;
    const match = known.find((id) => Topics.level(id) === level);
    if (match !== undefined) return match;
    try {
      return decodeURIComponent(level);
    } catch {
      return level;
    }
  }

  get requestFilter(): string {
    // A name may have several levels (Zigbee2MQTT's device/rename): every one gets an answer.
    return `${this.base}/bridge/request/#`;
  }

  /** The name of a bridge request topic (B/bridge/request/<name>), or null. */
  requestName(topic: string): string | null {
    const prefix = `${this.base}/bridge/request/`;
    if (!topic.startsWith(prefix)) return null;
    const name = topic.slice(prefix.length);
    return name === '' ? null : name;
  }

  bridgeResponse(name: string): string {
    return `${this.base}/bridge/response/${name}`;
  }

  /** Whether a topic is in the agent's own namespace (B itself or below it). */
  owns(topic: string): boolean {
    return topic === this.base || topic.startsWith(`${this.base}/`);
  }
}

export const ONLINE = JSON.stringify({ state: 'online' });
export const OFFLINE = JSON.stringify({ state: 'offline' });

/**
 * Why a topic name given by a client (an MQTT 5 response topic) must not be published to, or null
 * when it may be. Publishing to an invalid one makes the broker drop the connection.
 */
export function topicNameProblem(topic: string): string | null {
  if (topic === '') return 'it is empty';
  if (topic.includes('+') || topic.includes('#')) return 'it has a wildcard (+ or #)';
  if (topic.startsWith('$')) return 'it starts with $ (reserved for the broker)';
  if (Buffer.byteLength(topic, 'utf8') > 65_535) return 'it is longer than 65,535 bytes';
  for (const ch of topic) {
    const cp = ch.codePointAt(0) as number;
    if (forbiddenInTopic(cp)) return 'it has a control character, a noncharacter or a lone surrogate';
  }
  return null;
}
