export const USAGE = `Usage: chair-agent <command> [options]

Commands:
  run                       run the agent (the systemd service runs this)
  check                     validate the config and print it with secrets masked
  doctor                    check config, database, vendor API, broker and GPIO, with hints
  start DEVICE_ID [-m N]    start a chair through the same path as its button
  outbox                    transaction backlog: waiting, oldest, delivered, last delivery
  gpio [--blink]            the wiring test: the configured lines, each LED lit in turn, every press
  secrets set|unset|list    the stored secrets (systemd credentials); a value is read from stdin
  simulate [--port N]       run the vendor cloud simulator on loopback
  demo                      simulator + embedded broker + simulated GPIO + agent, no config needed
  schema                    print the JSON Schema of the config file

Options (every command):
  -c, --config FILE         config file (default: $CHAIR_AGENT_CONFIG, else /etc/chair-agent/config.yaml)
  -h, --help                help for the command

Exit codes: 0 ok, 78 configuration error, 1 any other failure.
`;

export const VERB_HELP: Record<string, string> = {
  run: `Usage: chair-agent run [--config FILE] [--pretty]

Runs the agent until SIGTERM or SIGINT. Logs are JSON lines on stdout (journald keeps them);
--pretty prints them human-readable instead (needs the dev dependency pino-pretty).
`,
  check: `Usage: chair-agent check [--config FILE]

Validates the config file and prints the resolved configuration (defaults filled in, secrets
masked with where they came from). Exits 0 when valid, 78 with every problem otherwise.
`,
  doctor: `Usage: chair-agent doctor [--config FILE]

Checks, one line each with ok/fail and a hint: config, database writable, vendor API reachable
with the key, broker reachable, GPIO lines accessible. Exits 0 when all pass, 1 otherwise.
`,
  start: `Usage: chair-agent start DEVICE_ID [--minutes N] [--json] [--config FILE]

Starts a chair through the same code path its button uses (the same checks, one control call,
confirmation by the chair's status) and prints the outcome. Exits 0 when the chair started.
`,
  outbox: `Usage: chair-agent outbox [--json] [--parked] [--retry-parked] [--config FILE]

Prints the transaction backlog: records waiting for the broker (and how many of them are parked:
refused by the broker, set aside and retried later), the oldest waiting, records delivered, the
last delivery. --parked lists the parked records with the reason and the next retry;
--retry-parked makes them due now (the running agent sends them within 10 minutes).
Reads the database of storage.path; safe while the agent runs.
`,
  gpio: `Usage: chair-agent gpio [--blink] [--config FILE]

The wiring test for installers. Prints every configured line as the kernel has it: chair, role
(button, LED, status LED), BCM number, chip, line offset, the kernel's name of the line, bias and
level. With --blink it lights each LED in turn for a second and names it. Then it prints every
button press with its chair and how long it was held, until Ctrl-C, which releases every line.
The service must not hold the lines meanwhile: sudo systemctl stop chair-agent first.
`,
  secrets: `Usage: chair-agent secrets set NAME | unset NAME | list [--config FILE]

The secrets the service gets as systemd credentials, stored as root-only files in credentials/
beside the config (/etc/chair-agent/credentials). NAME is vendor-api-key, webhook-secret or
mqtt-password. "set" reads the value from standard input (typed without echo on a terminal, or
piped: printf %s "$KEY" | sudo chair-agent secrets set vendor-api-key), so it never appears in
the shell's history or in ps. "list" says which are set, never their values. Needs root.
`,
  simulate: `Usage: chair-agent simulate [--port N] [--host H] [--chairs N] [--api-key K]
                          [--webhook-url URL] [--webhook-secret S] [--minute-seconds S]
                          [--locations A,B]

Runs the vendor cloud simulator (default 127.0.0.1:8090). With --config, the API key, the
webhook secret and the webhook URL are taken from that file, and it listens where the file's
vendor.baseUrl points (when that is plain http on this machine), so an agent using it talks to
the simulator unchanged. --minute-seconds makes a session minute last S real seconds. --locations
spreads the chairs over several sites in turn, as a vendor account that spans sites.
Control routes: GET /sim/state, POST /sim/faults, DELETE /sim/faults, POST /sim/paid,
POST /sim/transactions, POST /sim/chairs/<id> (see docs/SIMULATOR.md).
`,
  demo: `Usage: chair-agent demo [--chairs N] [--minute-seconds S]

Everything in one process with no config: the simulator, an embedded MQTT broker, simulated
GPIO and the agent, with a live view. Keys: 1-9 press a chair's button, p paid use, v cut or
restore the vendor uplink, b stop or restore the broker, q quit. Without a terminal it runs
and logs until SIGINT/SIGTERM.
`,
  schema: `Usage: chair-agent schema

Prints the JSON Schema of the configuration file (also in config/schema.json).
`,
};
