import { describe, it } from 'vitest';
import { has, type Tool } from './tool-detect.js';

export { has, oldNode, type Tool } from './tool-detect.js';

const title = (text: string, tools: Tool[]): string => `${text} ${tools.map((t) => `[needs ${t}]`).join(' ')}`;
const all = (tools: Tool[]): boolean => tools.every(has);

/** describe() for tests that need these tools: skipped, and counted as such, where one is missing. */
export function describeWith(tools: Tool | Tool[], text: string, fn: () => void): void {
  const list = Array.isArray(tools) ? tools : [tools];
  describe.skipIf(!all(list))(title(text, list), fn);
}

/** it() for a test that needs these tools. */
export function itWith(tools: Tool | Tool[], text: string, fn: () => Promise<void> | void, timeout?: number): void {
  const list = Array.isArray(tools) ? tools : [tools];
  it.skipIf(!all(list))(title(text, list), fn, timeout);
}
