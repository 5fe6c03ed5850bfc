#!/bin/sh
# chair-agent's crash-loop guard, in place of systemd's start rate limit, which counts manual
# starts too: an installer restarting the service while trying configs was locked out until
# `systemctl reset-failed`. Installed as /opt/chair-agent/lib/crash-guard.sh.
#
#   crash-guard.sh record   ExecStopPost= of the unit, after every stop. A stop that was not a
#                           crash (a clean exit, a manual stop or restart, exit 78: a config error)
#                           clears the record; a crash (another exit code, a signal, the
#                           watchdog, the OOM killer) adds its time to it.
#   crash-guard.sh check    by the launcher before `run` under the unit: after 5 crashes within
#                           5 minutes it says so and exits 78, which the unit does not restart
#                           (RestartPreventExitStatus=78); that exit clears the record, so the
#                           next manual start runs.
log=${CHAIR_AGENT_CRASH_LOG:-/var/lib/chair-agent/crashes}
# "<3>" when standard error is journald's stream (its device:inode is JOURNAL_STREAM), which then
# files the line as an error (the unit's SyslogLevelPrefix=, on by default), as the agent does its own.
err_prefix() {
  [ -n "${JOURNAL_STREAM:-}" ] && [ "$(stat -L -c '%d:%i' "/proc/$$/fd/2" 2>/dev/null)" = "$JOURNAL_STREAM" ] && printf '<3>'
}
WINDOW_S=300
MAX=5
case "${1:-}" in
  record)
    if [ "${SERVICE_RESULT:-success}" = success ] || { [ "${EXIT_CODE:-}" = exited ] && [ "${EXIT_STATUS:-}" = 78 ]; }; then
      rm -f "$log"
    else
      date +%s >> "$log" 2>/dev/null || true
    fi
    ;;
  check)
    [ -f "$log" ] || exit 0
    n=$(awk -v since="$(( $(date +%s) - WINDOW_S ))" '$1 >= since { n++ } END { print n + 0 }' "$log")
    if [ "$n" -ge "$MAX" ]; then
      echo "$(err_prefix)chair-agent: it crashed $n times in the last 5 minutes, so it is not restarted again by itself; journalctl -u chair-agent says why. After fixing that: sudo systemctl restart chair-agent" >&2
      rm -f "$log"
      exit 78
    fi
    ;;
  *)
    echo "usage: $0 record|check" >&2
    exit 64
    ;;
esac
exit 0
