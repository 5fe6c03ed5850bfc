import { spawnSync } from 'node:child_process';
import { cpus, totalmem, release, platform } from 'node:os';
import { mosquittoPath } from './broker.js';

export function machineDescription(): string[] {
  const cpu = cpus();
  const mosq = mosquittoPath();
  const mosqVersion = mosq ? (spawnSync(mosq, ['-h'], { encoding: 'utf8' }).stdout.split('\n')[0] ?? '').trim() : 'absent (aedes in-process)';
  return [
    `- CPU: ${cpu[0]?.model ?? 'unknown'} × ${cpu.length}`,
    `- Memory: ${Math.round(totalmem() / 2 ** 30)} GiB`,
    `- OS: ${platform()} ${release()}`,
    `- Node.js: ${process.version}`,
    `- Broker: ${mosqVersion}`,
  ];
}
