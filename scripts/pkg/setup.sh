#!/bin/sh
# chair-agent set-up for the tarball (systems the .deb does not cover). After
#   sudo tar -xzf chair-agent-<version>-linux-<arch>.tar.gz -C /opt
# run  sudo /opt/chair-agent/lib/setup.sh  : the chair-agent user (group gpio), /etc/chair-agent with
# the example config when there is none, the credentials directory, /var/lib/chair-agent, the unit in
# /etc/systemd/system (enabled), the GPIO udev rule, /usr/local/bin/chair-agent; the service starts once the config is
# valid. Run it again after unpacking a newer tarball: config, credentials and data are kept.
set -e
say() { printf 'chair-agent: %s\n' "$*"; }
[ "$(id -u)" -eq 0 ] || { echo "chair-agent: run it as root: sudo $0" >&2; exit 1; }
here=$(dirname "$(readlink -f "$0")")
. "$here/site-setup.sh"
[ "$(dirname "$here")" = "$APP" ] || { echo "chair-agent: unpack the tarball in /opt (found it in $(dirname "$here"))" >&2; exit 1; }
"$APP/bin/chair-agent" --version >/dev/null
ensure_user
ensure_config
ensure_dirs
install -m 0644 "$APP/app/systemd/chair-agent.service" /etc/systemd/system/chair-agent.service
mkdir -p /etc/udev/rules.d
install -m 0644 "$APP/app/systemd/60-chair-agent-gpio.rules" /etc/udev/rules.d/60-chair-agent-gpio.rules
apply_gpio_rule
mkdir -p /usr/local/bin
ln -sfn "$APP/bin/chair-agent" /usr/local/bin/chair-agent
enable_unit
start_if_valid
next_steps
