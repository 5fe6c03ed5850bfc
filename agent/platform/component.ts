/** Something with a lifetime: start() creates every timer and listener it owns, stop() removes them. */
export interface Component {
  readonly name: string;
  start(): Promise<void> | void;
  stop(): Promise<void> | void;
}
