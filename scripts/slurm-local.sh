#!/usr/bin/env bash
# A one-node Slurm 22.05 on localhost for drover's Slurm tests, without systemd (as root):
# munged, slurmctld and slurmd from Debian's packages, with tests/slurm/slurm.conf (8 CPU slots
# declared on any machine, 4 fake GPUs as character devices /dev/fakegpu0-3, partitions debug and
# high (high preempts debug by requeue), no accounting database: finished jobs in the jobcomp file).
#   scripts/slurm-local.sh install   # apt-get the packages (slurmctld slurmd slurm-client munge)
#   scripts/slurm-local.sh start     # (re)start it; ready when it returns (sinfo says idle)
#   scripts/slurm-local.sh stop      # stop the daemons by their pid files
#   scripts/slurm-local.sh status
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
conf="$here/../tests/slurm"

stop_one() {  # name pidfile
  local p
  [[ -s "$2" ]] || return 0
  p="$(cat "$2")"
  if kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p"
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then kill -KILL "$p"; fi
  fi
  rm -f "$2"
}

case "${1:-}" in
  install)
    apt-get install -y -o DPkg::Lock::Timeout=600 --no-install-recommends \
      slurmctld slurmd slurm-client munge
    ;;
  start)
    command -v slurmctld >/dev/null || { echo "no slurmctld: run $0 install first" >&2; exit 1; }
    [[ $(id -u) == 0 ]] || { echo "$0 start must run as root (it runs Slurm's daemons)" >&2; exit 1; }
    stop_one slurmd /run/slurm/slurmd.pid
    stop_one slurmctld /run/slurm/slurmctld.pid
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -m 0755 /run/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /etc/slurm
    install -m 0644 "$conf/slurm.conf" /etc/slurm/slurm.conf
    install -m 0644 "$conf/gres.conf" /etc/slurm/gres.conf
    for i in 0 1 2 3; do
      [[ -c /dev/fakegpu$i ]] || { rm -f /dev/fakegpu$i; mknod /dev/fakegpu$i c 195 $i; }
    done
    if [[ ! -s /etc/munge/munge.key ]]; then
      install -d -o munge -g munge -m 0700 /etc/munge
      dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
      chown munge:munge /etc/munge/munge.key
      chmod 0400 /etc/munge/munge.key
    fi
    if ! { [[ -s /run/munge/munged.pid ]] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; }; then
      runuser -u munge -- /usr/sbin/munged
    fi
    for _ in $(seq 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
    /usr/sbin/slurmctld -c          # cold start: no job of an earlier test is left
    /usr/sbin/slurmd -N localhost   # the node's name in slurm.conf, whatever the hostname
    state=unknown
    for _ in $(seq 300); do
      state="$(sinfo -h -n localhost -o %T 2>/dev/null | head -1 || true)"
      case "$state" in idle|mixed|allocated) break ;; esac
      sleep 0.1
    done
    case "$state" in
      idle|mixed|allocated) echo "slurm ready (node localhost: $state)" ;;
      *) echo "slurm did not come up (node state: $state); see /var/log/slurm/" >&2; exit 1 ;;
    esac
    ;;
  stop)
    stop_one slurmd /run/slurm/slurmd.pid
    stop_one slurmctld /run/slurm/slurmctld.pid
    stop_one munged /run/munge/munged.pid
    ;;
  status)
    sinfo -o '%P %a %D %T %c %G' 2>&1
    ;;
  *)
    echo "usage: $0 install|start|stop|status" >&2
    exit 2
    ;;
esac
