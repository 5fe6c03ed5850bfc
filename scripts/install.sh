#!/usr/bin/env bash
# chair-agent source install, for developers and for systems the .deb does not cover. Run as
# root from a clone where `npm ci && npm run build` has run. It installs the same tree the .deb
# does, on the runtime this checkout pins (node_modules/node-linux-<arch>), never the system's
# Node. Idempotent: run it again to upgrade; config, credentials and data are kept.
#
#   sudo scripts/install.sh                 install or upgrade, enable the service, start it if the config is valid
#   sudo scripts/install.sh --no-start      the same, without starting
#   sudo scripts/install.sh --uninstall     remove the service and the code; keep config, credentials and data
#   sudo scripts/install.sh --purge         remove everything, data and the chair-agent user included
#   scripts/install.sh --root DIR ...       act on a staging root instead of this machine (tests, image builds)
#
# Secrets given as CHAIR_AGENT_VENDOR_API_KEY, CHAIR_AGENT_WEBHOOK_SECRET, CHAIR_AGENT_MQTT_PASSWORD
# in the environment are stored as credentials; otherwise set them afterwards with
# `sudo chair-agent secrets set NAME`. An existing credential is kept unless a new one is given.
set -euo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROOT=""
MODE=install
START=yes
UNIT=/etc/systemd/system/chair-agent.service
WRAPPER=/usr/local/bin/chair-agent
UDEV_RULE=/etc/udev/rules.d/60-chair-agent-gpio.rules

say() { printf 'install: %s\n' "$*"; }
die() { printf 'install: error: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --root) ROOT="${2:?--root needs a directory}"; ROOT="${ROOT%/}"; shift 2 ;;
    --uninstall) MODE=uninstall; shift ;;
    --purge) MODE=purge; shift ;;
    --no-start) START=no; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done

[ "$(id -u)" -eq 0 ] || die "run as root: sudo $0"
if [ -n "$ROOT" ]; then
  mkdir -p "$ROOT"
  ROOT="$(cd "$ROOT" && pwd)"
fi
# shellcheck source=scripts/pkg/site-setup.sh
. "$SRC/scripts/pkg/site-setup.sh"

target_arch() {
  case "$(uname -m)" in
    x86_64) ARCH=x64; LOADER=/lib64/ld-linux-x86-64.so.2; DEB_ARCH=amd64 ;;
    aarch64|arm64) ARCH=arm64; LOADER=/lib/ld-linux-aarch64.so.1; DEB_ARCH=arm64 ;;
    *) die "$(uname -m) is not supported: chair-agent runs on 64-bit ARM (arm64) and x86-64 only" ;;
  esac
  # Before the runtime: a 32-bit system on a 64-bit kernel (Raspberry Pi OS 32-bit on a Pi 4 or 5)
  # never gets the runtime from npm ci, and "run npm ci" would send its admin round in a loop.
  [ -e "$LOADER" ] && [ "$(getconf LONG_BIT 2>/dev/null || echo 64)" = 64 ] ||
    die "this is a 32-bit system (its kernel is $(uname -m), its programs are 32-bit, no $LOADER): chair-agent needs a 64-bit OS; on a Raspberry Pi, install Raspberry Pi OS (64-bit)"
  RUNTIME_SRC="$SRC/node_modules/node-linux-$ARCH"
  [ -x "$RUNTIME_SRC/bin/node" ] || die "the pinned Node.js runtime is missing ($RUNTIME_SRC): run npm ci in $SRC"
  say "Node.js $("$RUNTIME_SRC/bin/node" --version) (pinned, from $RUNTIME_SRC)"
}

# Every native module of the installed app must load under the installed runtime: a module built
# for another Node fails here, not silently at the first press. npm never builds them (.npmrc:
# ignore-scripts): `npm run build` does, where a compiler is.
verify_native() {
  local app="$1" node="$1/../runtime/bin/node" problems=()
  (cd "$app" && "$node" -e "const D=require('better-sqlite3'); new D(':memory:').close()") 2>/dev/null ||
    problems+=("better-sqlite3 does not load under $("$node" --version)")
  if [ -d "$app/node_modules/onoff" ]; then
    (cd "$app" && "$node" -e "require('epoll')") 2>/dev/null || GPIO_ONOFF="epoll (onoff) does not load under $("$node" --version): run npm run build in $SRC, which builds it where g++ and make are"
  else
    GPIO_ONOFF="onoff is not installed (an optional dependency: npm ci in $SRC without --omit=optional brings it)"
  fi
  local addon="$app/native/prebuilds/linux-$ARCH/chair_gpiod.node"
  if [ ! -f "$addon" ]; then
    GPIO_GPIOD="the gpiod addon is not built ($addon: npm run build in $SRC makes it where a C compiler is)"
  elif ! "$node" -e "require('$addon')" 2>/dev/null; then
    GPIO_GPIOD="the gpiod addon does not load under $("$node" --version)"
  fi
  if [ ${#problems[@]} -gt 0 ]; then die "${problems[*]}"; fi
  local driver
  driver="$(cd "$app" && "$node" --input-type=module -e "
    import { readFileSync } from 'node:fs';
    import { parse } from 'yaml';
    import { DEFAULT_GPIO_DRIVER } from './dist/agent/config/schema.js';
    let c = {}; try { c = parse(readFileSync(process.argv[1], 'utf8')) ?? {}; } catch {}
    process.stdout.write(String(c?.gpio?.driver ?? DEFAULT_GPIO_DRIVER));" "$(R "$ETC/config.yaml")" 2>/dev/null)" || true
  if [ -n "${GPIO_ONOFF:-}" ]; then
    [ "$driver" = onoff ] && die "$GPIO_ONOFF, and the config uses gpio.driver: onoff; the buttons and LEDs would be dead"
    say "warning: $GPIO_ONOFF; gpio.driver: onoff will not work (gpiod and sim do)"
  fi
  if [ -n "${GPIO_GPIOD:-}" ]; then
    [ "$driver" = gpiod ] && die "$GPIO_GPIOD, and the config uses gpio.driver: gpiod; the buttons and LEDs would be dead"
    say "warning: $GPIO_GPIOD; gpio.driver: gpiod will not work"
  fi
  say "native modules load under the installed runtime"
}

install_app() {
  [ -f "$SRC/dist/agent/main.js" ] || die "nothing built in $SRC: run npm ci && npm run build first"
  local target new old
  target="$(R "$APP")"
  new="$target.new"
  old="$target.old"
  rm -rf "$new" "$old"
  mkdir -p "$new/runtime/bin" "$new/app/dist" "$new/bin" "$new/lib"
  cp "$RUNTIME_SRC/bin/node" "$new/runtime/bin/node"
  cp "$RUNTIME_SRC/LICENSE" "$new/runtime/LICENSE"
  cp -a "$SRC/dist/agent" "$new/app/dist/agent"
  cp -a "$SRC/package.json" "$SRC/package-lock.json" "$SRC/config" "$SRC/systemd" "$SRC/README.md" "$new/app/"
  if [ -d "$SRC/native/prebuilds" ]; then mkdir -p "$new/app/native" && cp -a "$SRC/native/prebuilds" "$new/app/native/"; fi
  # The clone's node_modules (native modules built for the pinned runtime), minus development tools.
  cp -a "$SRC/node_modules" "$new/app/node_modules"
  # The lockfile marks every package only development needs ("dev": true).
  "$RUNTIME_SRC/bin/node" -e '
    const { rmSync } = require("node:fs"); const { join } = require("node:path");
    const app = process.argv[1];
    const lock = require(join(app, "package-lock.json"));
    for (const [path, meta] of Object.entries(lock.packages ?? {})) if (path && meta.dev) rmSync(join(app, path), { recursive: true, force: true });' "$new/app"
  rm -rf "$new/app/node_modules"/node-linux-* "$new/app/node_modules/.bin"
  find "$new/app/node_modules" -path '*/build/Release/obj*' -prune -exec rm -rf {} +
  find "$new/app/node_modules" -mindepth 1 -type d -empty -delete
  cp "$SRC/scripts/pkg/site-setup.sh" "$new/lib/site-setup.sh"
  install -m 0755 "$SRC/scripts/pkg/crash-guard.sh" "$new/lib/crash-guard.sh"
  sed -e "s#@ARCH@#$DEB_ARCH#g" -e "s#@MACHINE@#$(uname -m)#g" -e "s#@LOADER@#$LOADER#g" \
    -e "s#@ENTRY@#$("$RUNTIME_SRC/bin/node" -p "require('$SRC/package.json').bin['chair-agent']")#g" -e 's# @NODE_FLAGS@##g' \
    "$SRC/scripts/pkg/launcher.sh" > "$new/bin/chair-agent"
  chmod 0755 "$new/bin/chair-agent"
  chown -R 0:0 "$new"
  chmod -R u=rwX,go=rX "$new"
  verify_native "$new/app"
  [ -d "$target" ] && mv "$target" "$old"
  mv "$new" "$target"
  rm -rf "$old"
  clear_compile_cache
  mkdir -p "$(R /usr/local/bin)"
  ln -sfn "$APP/bin/chair-agent" "$(R "$WRAPPER")"
  say "installed the agent in $APP (its own runtime, production dependencies only) and $WRAPPER"
}

store_credentials() {
  local spec name env value
  for spec in vendor-api-key:CHAIR_AGENT_VENDOR_API_KEY webhook-secret:CHAIR_AGENT_WEBHOOK_SECRET mqtt-password:CHAIR_AGENT_MQTT_PASSWORD admin-token:CHAIR_AGENT_ADMIN_TOKEN; do
    name="${spec%%:*}"
    env="${spec#*:}"
    value="${!env:-}"
    [ -n "$value" ] || continue
    (umask 077; printf '%s' "$value" > "$(R "$CREDENTIALS/$name")")
    say "stored credential $name"
  done
}

install_config() {
  install -d -m 0750 -o 0 -g "$SVC_GID" "$(R "$ETC")"
  if [ -f "$(R "$ETC/config.yaml")" ]; then
    say "kept the existing $ETC/config.yaml"
  else
    install -m 0640 -o 0 -g "$SVC_GID" "$SRC/config/config.example.yaml" "$(R "$ETC/config.yaml")"
    say "wrote $ETC/config.yaml from the example: edit it for this site"
  fi
  ensure_dirs
  store_credentials
}

install_unit() {
  mkdir -p "$(R /etc/systemd/system)"
  install -m 0644 "$SRC/systemd/chair-agent.service" "$(R "$UNIT")"
  enable_unit
  say "installed and enabled $UNIT"
  mkdir -p "$(R /etc/udev/rules.d)"
  install -m 0644 "$SRC/systemd/60-chair-agent-gpio.rules" "$(R "$UDEV_RULE")"
  apply_gpio_rule
}

uninstall() {
  if [ -n "$ROOT" ]; then
    systemctl --root="$ROOT" disable chair-agent.service >/dev/null 2>&1 || true
  elif systemd_running; then
    systemctl disable --now chair-agent.service >/dev/null 2>&1 || true
  fi
  rm -f "$(R "$UNIT")" "$(R "$WRAPPER")" "$(R "$UDEV_RULE")"
  rm -rf "$(R "$APP")" "$(R "$APP").new" "$(R "$APP").old"
  if systemd_running; then systemctl daemon-reload; fi
  say "removed the service and the code"
  if [ "$MODE" = purge ]; then
    rm -rf "$(R "$ETC")" "$(R "$STATE")"
    # shellcheck disable=SC2046
    if grep -q "^$SERVICE_USER:" "$(R /etc/passwd)" 2>/dev/null; then userdel $(root_args) "$SERVICE_USER" 2>/dev/null || true; fi
    say "purged $ETC, $STATE and the $SERVICE_USER user"
  else
    say "kept $ETC (config, credentials) and $STATE (data); --purge removes them"
  fi
}

case "$MODE" in
  install)
    target_arch
    ensure_user
    install_config
    install_app
    install_unit
    if [ "$START" = yes ]; then start_if_valid; fi
    next_steps
    ;;
  uninstall|purge)
    uninstall
    ;;
esac
