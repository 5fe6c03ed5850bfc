/**
 * Every topic the agent uses, from B = baseTopic/siteId. A DeviceId with a character that would
 * change the topic's levels (/, + or #) has it percent-encoded.
 */
export class Topics {
  readonly base: string;

  constructor(baseTopic: string, siteId: string) {
    this.base = `${baseTopic}/${siteId}`;
  }

  static level(deviceId: string): string {
    return deviceId.replace(/[%/+#]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
  }

  get bridgeState(): string {
    return `${this.base}/bridge/state`;
  }

  get bridgeInfo(): string {
    return `${this.base}/bridge/info`;
  }

  chair(deviceId: string): string {
    return `${this.base}/chairs/${Topics.level(deviceId)}`;
  }

  availability(deviceId: string): string {
    return `${this.chair(deviceId)}/availability`;
  }

  startResponse(deviceId: string): string {
    return `${this.chair(deviceId)}/start/response`;
  }

  transaction(deviceId: string): string {
    return `${this.base}/transactions/${Topics.level(deviceId)}`;
  }

  get startFilter(): string {
    return `${this.base}/chairs/+/start`;
  }

  /** The DeviceId of a start command topic, or null when the topic is not one. */
  startTarget(topic: string): string | null {
    const prefix = `${this.base}/chairs/`;
    if (!topic.startsWith(prefix) || !topic.endsWith('/start')) return null;
    const level = topic.slice(prefix.length, -'/start'.length);
    if (level === '' || level.includes('/')) return null;
    try {
      return decodeURIComponent(level);
    } catch {
      return level;
    }
  }
}

export const ONLINE = JSON.stringify({ state: 'online' });
export const OFFLINE = JSON.stringify({ state: 'offline' });
